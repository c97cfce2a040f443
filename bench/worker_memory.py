"""Worker memory, measured by PSS: the platform's worker against a bare Playwright loop.

    .venv/bin/python bench/worker_memory.py --jobs 300 [--concurrency 2] [--sides ...]

Three sides, one after the other, each in its own processes, each running the same job
(bench/common.py) ``--jobs`` times at the same concurrency against the demo site on
127.0.0.1:

- ``platform``: ``python -m browser_task`` as the local stack runs it (egress proxy, S3
  uploads, DynamoDB writes against moto in another process, which is not counted);
- ``bare``: a bare loop (a fresh context per job) in a Python that imports only Playwright,
  Chromium launched as the worker launches it (same executable, switches, driver env);
- ``default``: the same bare loop, Chromium launched with Playwright's defaults.

Every 0.5 s it sums PSS over the side's whole process tree (Python + Playwright's node
driver + every Chromium process) and prints peak, steady state (median of the second half),
the parts, and the growth from the start (10-30 % of the run) to the end (last 20 %).
PSS counts each shared page once across the tree, unlike summed RSS. Pages of files
(Chromium's binary) are also shared with other processes on the machine, so the
anonymous part (private to the tree) is printed too: it does not move when someone else
starts a browser. Nothing is asserted; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    Measured,
    MemoryRun,
    bare_loop,
    next_line,
    python,
    python_env,
    ran_every_job,
    sampling,
    workflow,
)

SIDES = ("platform", "bare", "default")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


# --- the bare side, in its own Python ---------------------------------------------------------
def bare_child(site: str, jobs: int, concurrency: int, launch: str) -> int:
    def ready() -> None:
        print("ready", flush=True)

    warmed = False

    def on_job() -> None:
        nonlocal warmed
        if not warmed:
            warmed = True
            ready()

    ok, seconds = asyncio.run(bare_loop(site, jobs, concurrency, launch=launch, on_job=on_job))
    print(f"done {ok} {seconds:.2f}", flush=True)
    return 0


def run_bare(site: str, jobs: int, concurrency: int, launch: str, interval: float) -> MemoryRun:
    run = MemoryRun(
        "bare loop, worker's launch" if launch == "worker" else "bare loop, default", jobs
    )
    command = [python(), __file__, "--bare-child", launch, "--site", site]
    command += ["--jobs", str(jobs), "--concurrency", str(concurrency)]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        text=True,
        env=python_env(),
    )
    assert proc.stdout is not None
    # "ready": the first job is done, everything is warm. The child's other lines (the
    # header every bench prints) are skipped: reading the header as the answer measured
    # nothing and counted no job.
    line = next_line(proc.stdout, ("ready", "done"))
    with sampling(run, proc.pid, interval):
        if line.startswith("ready"):
            line = next_line(proc.stdout, ("done",))
    proc.wait(60)
    if line.startswith("done"):
        _, ok, seconds = line.split()
        run.succeeded, run.seconds = int(ok), float(seconds)
    return run


# --- the platform side --------------------------------------------------------------------------
def run_platform(
    site: str, jobs: int, concurrency: int, interval: float, log_dir: Path
) -> MemoryRun:
    from devstack.provision import create_all
    from pagefleet.jobs.models import JobRequest
    from pagefleet.jobs.service import submit_job
    from pagefleet.runtime import RUNTIME
    from pagefleet.specs.settings import WORKER_PROCESS_ENV, WorkerSettings, to_env

    res = create_all(
        RUNTIME.client("dynamodb"),
        RUNTIME.client("sqs"),
        RUNTIME.client("s3"),
        prefix=f"m{uuid.uuid4().hex[:6]}-",
    )
    settings = WorkerSettings(
        jobs_table=res.jobs_table,
        tenants_table=res.tenants_table,
        artifacts_bucket=res.artifacts_bucket,
        queue_urls=res.queue_urls,
        allow_loopback=True,
        poll_wait_seconds=2,
        concurrency=concurrency,
        stage="local",
    )
    services = RUNTIME.job_services(settings)
    # The worker's process environment as it is deployed (a MALLOC_ARENA_MAX of the caller's
    # own goes over it: 16 is glibc's own cap on 2 cores, to measure without it).
    env = {**WORKER_PROCESS_ENV, **python_env(), **to_env(settings)}
    env["PAGEFLEET_WORKER_ID"] = "memory-bench"
    env["POWERTOOLS_LOG_LEVEL"] = "WARNING"
    log = (log_dir / "worker.log").open("w")
    worker = subprocess.Popen(
        [python(), "-m", "browser_task"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    run = MemoryRun("platform (python -m browser_task)", jobs)
    request = JobRequest.model_validate(workflow(site))
    try:
        first = submit_job(services, "bench", request).job.job_id
        ids = [first] + [submit_job(services, "bench", request).job.job_id for _ in range(jobs)]
        _wait_final(services, [first])  # warm: the browser is up and has run one job
        with sampling(run, worker.pid, interval):
            t0 = time.monotonic()
            statuses = _wait_final(services, ids[1:])
            run.seconds = time.monotonic() - t0
        run.succeeded = statuses.get("succeeded", 0)
        if worker.poll() is not None:
            raise RuntimeError(f"the worker exited early; see {log_dir / 'worker.log'}")
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
        log.close()
    return run


def _wait_final(services: object, ids: list[str]) -> dict[str, int]:
    store = services.store  # type: ignore[attr-defined]
    statuses: dict[str, int] = {}
    for job_id in ids:
        while True:
            job = store.get("bench", job_id, consistent=False)
            if job.status.is_final:
                statuses[job.status.value] = statuses.get(job.status.value, 0) + 1
                break
            time.sleep(0.5)
    return statuses


# --- report ------------------------------------------------------------------------------------
def report(runs: dict[str, MemoryRun], concurrency: int) -> None:
    print(
        f"\n{'side':36} {'jobs':>5} {'ok':>4} {'jobs/s':>6} {'peak':>6} {'steady':>7} "
        f"{'python':>7} {'driver':>7} {'chromium':>9} {'growth':>7}"
    )
    for run in runs.values():
        rate = run.jobs / run.seconds if run.seconds else 0.0
        for private in (False, True):
            label = run.label if not private else "  anonymous part"
            head = f"{run.jobs:5d} {run.succeeded:4d} {rate:6.2f}" if not private else " " * 17
            print(
                f"{label:36} {head} {run.peak(anon=private):6.0f} "
                f"{run.steady(anon=private):7.0f} {run.steady('python', private):7.0f} "
                f"{run.steady('driver', private):7.0f} {run.steady('chromium', private):9.0f} "
                f"{run.growth_percent(private):6.1f}%"
            )
    print("(MB of PSS; anonymous part = private to the tree, not shared with other processes")
    print(" on the machine; steady = median of the second half; growth = the last 20 % of the")
    print(" run against 10-30 %)")
    # A ratio only between sides that ran every job: one whose loop failed measured an
    # idle Python, and its ratio would read as a result.
    whole = {
        side for side, run in runs.items() if ran_every_job(run.label, run.succeeded, run.jobs)
    }
    platform, bare, default = (runs.get(s) if s in whole else None for s in SIDES)
    if platform and bare:
        ratio = platform.steady() / bare.steady()
        anon = platform.steady(anon=True) / bare.steady(anon=True)
        peak = platform.peak() / bare.peak()
        print(
            f"memory ratio platform/bare = {ratio:.2f} (steady PSS; anonymous part {anon:.2f}, "
            f"peak {peak:.2f}; bare = the worker's launch)"
        )
    if platform and default:
        ratio = platform.steady() / default.steady()
        anon = platform.steady(anon=True) / default.steady(anon=True)
        print(f"memory ratio platform/bare default = {ratio:.2f} (anonymous part {anon:.2f})")
    if platform:
        print(
            f"growth = {platform.growth_percent():.1f} % "
            f"(anonymous part {platform.growth_percent(anon=True):.1f} %)"
        )
        # Which process grows: a leak shows in one part, load from elsewhere in all.
        print(
            "growth by part, anonymous MB from 10-30 % to the last 20 %: "
            + ", ".join(
                f"{part} {platform.start_level(True, part):.0f} -> "
                f"{platform.end_level(True, part):.0f}"
                for part in ("python", "driver", "chromium")
            )
        )
    if default:
        for run in (r for r in (platform, bare) if r is not None):
            cut = 1 - run.steady() / default.steady()
            cut_anon = 1 - run.steady(anon=True) / default.steady(anon=True)
            print(
                f"PSS per slot, {run.label} vs default launch: "
                f"{run.steady() / concurrency:.0f} vs {default.steady() / concurrency:.0f} MB, "
                f"{cut * 100:.0f} % less (anonymous part: "
                f"{run.steady(anon=True) / concurrency:.0f} vs "
                f"{default.steady(anon=True) / concurrency:.0f} MB, {cut_anon * 100:.0f} % less)"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--sides", default=",".join(SIDES), help="of " + ",".join(SIDES))
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--bare-child", choices=("worker", "default"), help=argparse.SUPPRESS)
    parser.add_argument("--site", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_child:
        return bare_child(args.site, args.jobs, args.concurrency, args.bare_child)

    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = set(sides) - set(SIDES)
    if unknown:
        parser.error(f"unknown sides {sorted(unknown)}")
    import tempfile

    from devstack.demo_site import DemoSite

    log_dir = Path(tempfile.mkdtemp(prefix="pagefleet-memory-"))
    port = free_port()
    moto = subprocess.Popen(
        [python(), "-m", "devstack.embedded_aws", "-H", "127.0.0.1", "-p", str(port)],
        stdout=(log_dir / "moto.log").open("w"),
        stderr=subprocess.STDOUT,
        env=python_env(),
    )
    site = DemoSite(0).start()
    runs: dict[str, MemoryRun] = {}
    try:
        wait_for_port(port)
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_REGION": "us-east-1",
                "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "NO_PROXY": "127.0.0.1,localhost",
            }
        )
        print(
            f"{args.jobs} jobs per side, concurrency {args.concurrency}, {os.cpu_count()} CPUs, "
            f"logs in {log_dir}",
            flush=True,
        )
        for side in sides:
            print(f"running {side}…", flush=True)
            if side == "platform":
                runs[side] = run_platform(
                    site.url, args.jobs, args.concurrency, args.interval, log_dir
                )
            else:
                launch = "worker" if side == "bare" else "default"
                runs[side] = run_bare(site.url, args.jobs, args.concurrency, launch, args.interval)
        report(runs, args.concurrency)
    finally:
        site.stop()
        moto.terminate()
        try:
            moto.wait(10)
        except subprocess.TimeoutExpired:
            moto.kill()
    return 0 if all(r.succeeded == r.jobs for r in runs.values()) else 1


if __name__ == "__main__":
    with Measured("bench/worker_memory.py"):
        code = main()
    sys.exit(code)
