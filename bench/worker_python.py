"""Where a plain job's Python and driver work goes: the worker against the bare loop.

    .venv/bin/python bench/worker_python.py [--jobs 40] [--warmup 4] [--protocol] [--profile]
    .venv/bin/python bench/worker_python.py --stack [--jobs 20] [--profile] [--save rows.json]
    (either: [--path '/gallery?images=100'], a page of 102 requests instead of the front page)

Each side runs in a child Python of its own against the demo site (served by this process),
after ``--warmup`` jobs:

- bare: ``bench.common.bare_loop``, Chromium launched as the worker launches it;
- worker: the worker built by ``build_worker`` on the ports' in-memory fakes
  (bench/fakes_worker.py, no request latency): the worker's own Python, no AWS client's.

What it prints, a job:

- CPU by part (always): the Python of each side (the worker's threads; the child's main
  thread, which submits the jobs and waits for them as the API and a client would, is left
  out), its driver (node) and its Chromium. Times: they depend on the load.
- ``--protocol``: the messages between the Python client and the driver (``DEBUG=pw:channel``)
  and between the driver and Chromium (``DEBUG=pw:protocol``, CDP), by method, and what the
  worker sends more than the bare loop. Counts: they do not depend on the load.
- ``--profile``: a cProfile of the worker's threads over the measured jobs, timed in thread
  CPU time: the functions with the most own time and the most cumulative time, in ms a job.
  Profiling inflates every figure (compare profiles with profiles).

``--stack``: the worker of a local stack instead, whose AWS clients (boto3) talk to the
embedded AWS: its process's CPU a job (all its threads) over a second window of ``--jobs``
after a first one, and with ``--profile`` that window's profile (bench/profile_hook.py,
imported at the worker's start through a ``sitecustomize``; marks are SIGUSR1).

Prints figures; asserts nothing. The logs' level is ``POWERTOOLS_LOG_LEVEL`` (WARNING unless
set, as in bench/cpu_per_job.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

from bench.common import (
    REPO_ROOT,
    Measured,
    bare_loop,
    browser_cpu_s,
    lift_submission_rate,
    python,
    python_env,
    ran_every_job,
    workflow,
)
from bench.profile_hook import ENV, ThreadProfiles, cpu_seconds, difference

START, END = "=== measured jobs start", "=== measured jobs end"
# Where a thread waits rather than works (their own time is not work).
_IDLE = re.compile(r"\b(acquire|poll|select|sleep|wait|_wait_for_tstate_lock)\b")


# --- in the child ---------------------------------------------------------------------------
class Marks:
    """CPU seconds at the start and the end of the measured jobs, by part."""

    def __init__(self, main_thread: bool) -> None:
        self._main_thread = main_thread  # leave the child's main thread out (the worker side)
        self.at: list[dict[str, float]] = []

    def mark(self, line: str) -> None:
        python_s = cpu_seconds()
        if not self._main_thread:
            python_s -= time.thread_time()
        self.at.append({"Python": python_s, **browser_cpu_s(psutil.Process())})
        print(line, file=sys.stderr, flush=True)

    def per_job(self, jobs: int) -> dict[str, float]:
        first, last = self.at[0], self.at[-1]
        return {part: (last[part] - first[part]) / jobs * 1000 for part in last}


def top(rows: list[list[Any]], jobs: int, count: int) -> dict[str, list[list[Any]]]:
    """The functions with the most own and cumulative time (``profile_hook.difference``
    rows), in ms a job; waits are left out (their time is not work)."""
    listed = []
    for path, line, name, calls, own, cumulative in rows:
        if _IDLE.search(name) and (path == "~" or "threading" in path):
            continue
        listed.append(
            [_name((path, line, name)), calls / jobs, own / jobs * 1000, cumulative / jobs * 1000]
        )
    own_total = sum(r[2] for r in listed)
    by_own = sorted(listed, key=lambda r: -r[2])[:count]
    ours = [
        r for r in listed if not r[0].startswith(("asyncio", "threading", "concurrent", "~", "<"))
    ]
    by_cumulative = sorted(ours, key=lambda r: -r[3])[:count]
    return {"own": by_own, "cumulative": by_cumulative, "total": [[own_total]]}


def _name(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":
        return f"~ {name}"
    for root in (str(Path(__file__).resolve().parents[1]) + "/", "site-packages/", "python3.11/"):
        if root in path:
            path = path.split(root, 1)[1]
            break
    return f"{path}:{line} {name}"


def bare_child(site: str, path: str, jobs: int, warmup: int) -> dict[str, Any]:
    marks = Marks(main_thread=True)
    done = 0

    def on_job() -> None:
        nonlocal done
        done += 1
        if done == warmup:
            marks.mark(START)
        elif done == warmup + jobs:
            marks.mark(END)

    if warmup == 0:
        marks.mark(START)
    ok, _seconds = asyncio.run(
        bare_loop(site, jobs, 2, launch="worker", warmup=warmup, on_job=on_job, path=path)
    )
    return {"cpu": marks.per_job(jobs), "succeeded": ok}


def worker_child(
    site: str, path: str, jobs: int, warmup: int, profile: bool, count: int
) -> dict[str, Any]:
    profiles = ThreadProfiles() if profile else None
    from bench.fakes_worker import FakesWorker

    body = workflow(site, path)
    marks = Marks(main_thread=False)
    with FakesWorker(latency_ms=0, concurrency=2) as fakes:
        fakes.run(body, warmup, 600)
        before = profiles.snapshot() if profiles else {}
        calls_before = dict(fakes.counts)
        marks.mark(START)
        ok, _seconds = fakes.run(body, jobs, 600)
        marks.mark(END)
        after = profiles.snapshot() if profiles else {}
        calls = {k: (v - calls_before.get(k, 0)) / jobs for k, v in fakes.counts.items()}
    out: dict[str, Any] = {"cpu": marks.per_job(jobs), "succeeded": ok, "port_calls": calls}
    if profiles is not None:
        out["profile"] = top(difference(before, after), jobs, count)
    return out


# --- in the bench process -------------------------------------------------------------------
def stack_run(jobs: int, warmup: int, profile: bool, path: str = "/") -> dict[str, Any]:
    """The worker of a local stack (its AWS clients talking to the embedded AWS): its
    process's CPU a job over the measured jobs and, with ``profile``, its profile (through
    a ``sitecustomize`` importing bench/profile_hook.py)."""
    from bench.e2e_throughput import wait_final
    from devstack.stack import LocalStack

    with tempfile.TemporaryDirectory(prefix="worker-python-") as tmp:
        (Path(tmp) / "sitecustomize.py").write_text("import bench.profile_hook\n")
        out = Path(tmp) / "profile.json"
        paths = [tmp, str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {"PYTHONPATH": os.pathsep.join(paths), ENV: str(out)}
        if not profile:
            env[ENV + "_MODE"] = "cpu"
        if os.environ.get(ENV + "_CALLERS"):
            env[ENV + "_CALLERS"] = os.environ[ENV + "_CALLERS"]
        with LocalStack(api_port=0, workers=1, concurrency=2, worker_env=env) as stack:
            lift_submission_rate(stack)
            worker = next(
                p for p in psutil.Process().children() if "browser_task" in " ".join(p.cmdline())
            )
            body = workflow(stack.site_url, path)
            with stack.client() as api:
                wait_final(stack, [api.submit(body).job_id for _ in range(warmup)], 600)
                counts: dict[Any, int] = {}
                # Two windows of ``jobs``: the second is the figure (nothing of the start
                # left in it: a first use in the first window shows only there).
                for _window in range(2):
                    worker.send_signal(signal.SIGUSR1)
                    ids = [api.submit(body).job_id for _ in range(jobs)]
                    for status, count in wait_final(stack, ids, 600)[0].items():
                        counts[status.value] = counts.get(status.value, 0) + count
                worker.send_signal(signal.SIGUSR1)
            second = out.with_suffix(".2.json")
            deadline = time.monotonic() + 30
            while not second.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            stack.cleanup_logs()
        first = json.loads(out.read_text())
        written = json.loads(second.read_text())
    result: dict[str, Any] = {
        "python_ms": written["cpu_s"] / jobs * 1000,
        "first_window_ms": first["cpu_s"] / jobs * 1000,
        "statuses": counts,
    }
    if profile:
        result["rows"] = written["rows"]
        result["callers"] = written.get("callers", {})
    return result


def run_child(side: str, site: str, args: argparse.Namespace, mode: str) -> dict[str, Any]:
    """One side's child run; ``mode``: cpu, profile (the worker's threads) or protocol."""
    env = python_env()
    env.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    protocol = mode == "protocol"
    if protocol:
        env["DEBUG"] = "pw:channel,pw:protocol"
    with tempfile.TemporaryDirectory(prefix="worker-python-") as tmp:
        result, errors = Path(tmp) / "result.json", Path(tmp) / "stderr.log"
        command = [python(), __file__, "--child", side, site, args.path, str(args.jobs)]
        command += [str(args.warmup)]
        command += [str(result), "1" if mode == "profile" else "0", str(args.top)]
        with open(errors, "w") as stderr:
            done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        if done.returncode != 0:
            raise RuntimeError(f"the {side} side failed:\n{errors.read_text()[-4000:]}")
        out: dict[str, Any] = json.loads(result.read_text())
        if protocol:
            out["messages"] = messages(errors, args.jobs)
    return out


_CHANNEL = re.compile(r"pw:channel (SEND>|<RECV|<EVENT) (\{.*)$")
_CDP = re.compile(r"pw:protocol (SEND ►|◀ RECV) (\{.*)$")


def messages(log: Path, jobs: int) -> dict[str, float]:
    """Messages a job between the markers, by kind: ``client>driver`` calls by object type
    and method, ``driver>client`` events, ``driver>Chromium`` CDP commands and
    ``Chromium>driver`` CDP events (a reply to each call or command is counted once as
    ``replies``)."""
    counts: Counter[str] = Counter()
    measuring = False
    with open(log, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if START in line:
                measuring = True
                continue
            if END in line:
                break
            if not measuring:
                continue
            if found := _CHANNEL.search(line):
                kind, text = found.groups()
                message = _json(text)
                if kind == "<RECV":
                    counts["client: replies"] += 1
                    continue
                what = f"{str(message.get('guid', '')).split('@')[0]}.{message.get('method')}"
                if message.get("method") == "__create__":
                    what += f" {message.get('params', {}).get('type')}"
                counts[f"client>driver {what}" if kind == "SEND>" else f"driver>client {what}"] += 1
            elif found := _CDP.search(line):
                kind, text = found.groups()
                message = _json(text)
                method = message.get("method")
                if method is None:
                    counts["CDP: replies"] += 1
                elif kind == "SEND ►":
                    counts[f"driver>Chromium {method}"] += 1
                else:
                    counts[f"Chromium>driver {method}"] += 1
    return {k: v / jobs for k, v in counts.items()}


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def whole_sides(sides: dict[str, dict[str, Any]], jobs: int) -> bool:
    """Whether both sides ran every job: CPU a job over the jobs asked, of a side whose jobs
    failed, would read as a result."""
    whole = {side for side, out in sides.items() if ran_every_job(side, out["succeeded"], jobs)}
    return whole == set(sides)


def print_cpu(sides: dict[str, dict[str, Any]]) -> None:
    print("\nCPU a job (ms): part, bare, worker")
    for part in ("Python", "driver", "Chromium"):
        print(f"  {part:9} {sides['bare']['cpu'][part]:7.1f} {sides['worker']['cpu'][part]:7.1f}")
    calls = sides["worker"].get("port_calls", {})
    print(
        f"worker: {sides['worker']['succeeded']} succeeded; port calls a job "
        f"(submissions included) {sum(calls.values()):.1f}"
    )


def print_messages(sides: dict[str, dict[str, Any]]) -> None:
    bare, worker = sides["bare"]["messages"], sides["worker"]["messages"]
    for prefix in ("client", "driver>client", "CDP", "driver>Chromium", "Chromium>driver"):
        b = sum(v for k, v in bare.items() if k.startswith(prefix))
        w = sum(v for k, v in worker.items() if k.startswith(prefix))
        print(
            f"messages a job, {prefix + ('>driver' if prefix == 'client' else ''):16} "
            f"bare {b:6.1f}, worker {w:6.1f}"
        )
    print("\nmessages a job, by method (worker - bare, largest first):")
    names = sorted(set(bare) | set(worker), key=lambda k: -(worker.get(k, 0) - bare.get(k, 0)))
    for name in names:
        extra = worker.get(name, 0) - bare.get(name, 0)
        if abs(extra) >= 0.05:
            print(
                f"  {extra:+6.2f}  {name}  "
                f"(bare {bare.get(name, 0):.2f}, worker {worker.get(name, 0):.2f})"
            )


def print_profile(profile: dict[str, list[list[Any]]]) -> None:
    print(f"\nworker's threads, profiled: {profile['total'][0][0]:.1f} ms of own time a job")
    for key, title in (("own", "own time"), ("cumulative", "cumulative time")):
        print(f"\ntop by {title} (ms a job; calls a job): own, cumulative, calls, function")
        for name, calls, own, cumulative in profile[key]:
            print(f"  {own:6.2f} {cumulative:7.2f} {calls:7.1f}  {name}")


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--child"]:
        side, url, path, jobs, warmup, result, profile, count = sys.argv[2:10]
        if side == "bare":
            out = bare_child(url, path, int(jobs), int(warmup))
        else:
            out = worker_child(url, path, int(jobs), int(warmup), profile == "1", int(count))
        Path(result).write_text(json.dumps(out))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=40, help="measured jobs a side")
    parser.add_argument("--warmup", type=int, default=4, help="jobs before measuring")
    parser.add_argument("--protocol", action="store_true", help="count the messages too")
    parser.add_argument("--profile", action="store_true", help="profile the worker's threads")
    parser.add_argument("--top", type=int, default=30, help="functions listed by --profile")
    parser.add_argument(
        "--stack",
        action="store_true",
        help="the worker of a local stack instead (its AWS clients' work included)",
    )
    parser.add_argument("--save", help="with --profile: write the profile's rows (JSON) here")
    parser.add_argument(
        "--path",
        default="/",
        help="the demo site's page each job reads ('/gallery?images=100': a page of 102 requests)",
    )
    args = parser.parse_args(argv)
    if args.stack:
        return stack_main(args)
    from devstack.demo_site import DemoSite

    site = DemoSite().start()
    try:
        with Measured("bench/worker_python.py"):
            sides = {side: run_child(side, site.url, args, "cpu") for side in ("bare", "worker")}
            if not whole_sides(sides, args.jobs):
                return 1
            print_cpu(sides)
            if args.profile:
                print_profile(run_child("worker", site.url, args, "profile")["profile"])
            if args.protocol:
                counted = {
                    side: run_child(side, site.url, args, "protocol") for side in ("bare", "worker")
                }
                if not whole_sides(counted, args.jobs):
                    return 1
                for side, out in counted.items():
                    sides[side]["messages"] = out["messages"]
                print_messages(sides)
    finally:
        site.stop()
    return 0


def stack_main(args: argparse.Namespace) -> int:
    """The local stack's worker: its Python's CPU a job, then (``--profile``) its profile."""
    with Measured("bench/worker_python.py --stack"):
        plain = stack_run(args.jobs, args.warmup, profile=False, path=args.path)
        # Both windows' jobs: the figure is the second's, the first's are its warm-up.
        if not ran_every_job("the local stack's worker", _succeeded(plain), 2 * args.jobs):
            return 1
        print(
            f"local stack's worker: Python {plain['python_ms']:.1f} ms a job ({plain['statuses']})"
        )
        if args.profile:
            profiled = stack_run(args.jobs, args.warmup, profile=True, path=args.path)
            if not ran_every_job("the profiled worker", _succeeded(profiled), 2 * args.jobs):
                return 1
            print(f"profiled: Python {profiled['python_ms']:.1f} ms a job")
            if args.save:
                Path(args.save).write_text(json.dumps(profiled["rows"]))
            for name, callers in profiled["callers"].items():
                print(f"called {name} by: {callers}")
            print_profile(top(profiled["rows"], args.jobs, args.top))
    return 0


def _succeeded(run: dict[str, Any]) -> int:
    return int(run["statuses"].get("succeeded", 0))


if __name__ == "__main__":
    sys.exit(main())
