"""Latency on an idle local stack: queue delay, submit latency, bursts, cold imports.

    .venv/bin/python bench/latency.py [--jobs 200] [--bursts 10] [--import-runs 7] [--pyc]

1. **Queue delay** (submit to running): ``--jobs`` jobs one after the other on an idle
   stack (one worker, two slots), each waited for before the next. Measured from the job
   records: ``started_at`` (the claim) minus ``created_at`` (the API), split at
   ``enqueued_at`` (message sent).
2. **Submit latency**: ``POST /v1/jobs`` answered, p50/p99, for the same jobs, submitted
   alternately (a) over HTTP through the local gateway (authorizer cached, API in its warm
   execution environment) and (b) in-process: the API handler invoked directly with a REST
   event against the embedded AWS.
3. **A burst on an idle worker**: ``--bursts`` times, as many jobs as the worker has slots
   submitted together after the stack was idle a while (its slots waiting in long polls,
   at a random point of their poll period); per burst, the queue delay of the job that
   started last. Every slot should start a job as soon as one arrives, not one slot per
   poll period.
4. **Cold imports**: each Lambda handler module imported by a fresh Python, several runs,
   median, against the floor every API function pays (boto3, Powertools' REST resolver,
   pydantic); then the imports above the floor by self time (``-X importtime``). Every
   child, the floor's included, runs in a Lambda-like environment (``LAMBDA_ENV``:
   ``LAMBDA_TASK_ROOT``, ``AWS_LAMBDA_FUNCTION_NAME``, ``AWS_REGION``, fake credentials,
   and the stack's ``FUNCTION_ENV``),
   because the Tracer's cost depends on it: outside Lambda the X-Ray SDK's recorder builds
   a sampler with a botocore X-Ray client at import (~0.1 s) and the Powertools Tracer is
   disabled; in Lambda the recorder samples locally, and the Tracer is enabled and patches
   the libraries it is told to (all it knows, when told nothing).
   From source, no ``.pyc`` (as before 2026-12-03, when the code asset and the layer
   shipped none and Lambda could write none: ``/var/task`` and ``/opt`` are read-only);
   the children look for ``.pyc`` in an empty ``PYTHONPYCACHEPREFIX`` and write none.
   ``--pyc``: with ``.pyc`` for everything (written by an uncounted first round into that
   prefix), as the asset and the layer now ship them
   (``infra/constructs/lambda_factory.py``). ``--jobs 0`` prints both.

Prints figures; asserts nothing. Everything is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Measured, python, python_env
from pagefleet.specs.resources import FUNCTION_ENV

HANDLERS = (
    "functions.api.handler",
    "functions.authorizer.handler",
    "functions.dead_letters.handler",
    "functions.sweeper.handler",
)
FLOOR = (
    "import boto3; import pydantic; "
    "from aws_lambda_powertools.event_handler import APIGatewayRestResolver"
)
# What every function's Powertools Tracer adds (each handler module makes one at import):
# the X-Ray SDK and, in Lambda, the patching of botocore (``functions.xray``).
TRACER = "; from functions.xray import function_tracer; function_tracer('floor')"
# What the Lambda runtime sets that the imports react to (the X-Ray SDK, the Tracer,
# botocore), and what the stack sets for every function (``FUNCTION_ENV``); the credentials
# are fake: nothing may call AWS at import.
LAMBDA_ENV = {
    **FUNCTION_ENV,
    "AWS_LAMBDA_FUNCTION_NAME": "pagefleet-cold-import",
    "AWS_EXECUTION_ENV": "AWS_Lambda_python3.11",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
# Set by the local stack or a developer's shell; the Lambda runtime sets none of them.
NOT_IN_LAMBDA = ("POWERTOOLS_TRACE_DISABLED", "POWERTOOLS_DEV", "AWS_SAM_LOCAL", "AWS_PROFILE")
TARGET_P50_MS = 30
TARGET_P99_MS = 150


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def tiny_job(site: str) -> dict[str, Any]:
    return {
        "max_attempts": 1,
        "steps": [
            {"action": "goto", "url": f"{site}/about.html"},
            {"action": "extract", "name": "title", "selector": "h1"},
        ],
    }


# --- 1 and 2: sequential jobs, submitted alternately over HTTP and in-process -------------------
def direct_submitter(stack: Any) -> Any:
    """Submit through the API handler called directly (no gateway, no HTTP) with a REST
    proxy event, against the embedded AWS; returns the job id."""
    import json

    from devstack.gateway import HttpRequest, proxy_resource, rest_event
    from devstack.stack import DEV_TENANT
    from functions.api.handler import handler

    body = json.dumps(tiny_job(stack.site_url)).encode()

    def submit() -> tuple[str, float]:
        request = HttpRequest(
            method="POST",
            raw_path="/jobs",  # the stage (v1) is not part of the resource path
            headers=[("Content-Type", "application/json"), ("Host", "127.0.0.1")],
            body=body,
            source_ip="127.0.0.1",
        )
        resource, params = proxy_resource(request.path)
        event = rest_event(
            request,
            resource=resource,
            path_parameters=params,
            authorizer={"tenant_id": DEV_TENANT, "admin": "false", "principalId": DEV_TENANT},
            api_id="local",
            stage="v1",
            request_id=str(uuid.uuid4()),
        )
        t0 = time.perf_counter()
        answer = handler(event, None)
        elapsed = (time.perf_counter() - t0) * 1000
        if answer["statusCode"] != 202:
            raise RuntimeError(f"submit failed: {answer['statusCode']} {answer['body'][:200]}")
        return str(json.loads(answer["body"])["job_id"]), elapsed

    return submit


@dataclass
class Sequential:
    delays: list[float] = field(default_factory=list)  # created -> started (claim), ms
    api_side: list[float] = field(default_factory=list)  # created -> enqueued, ms
    worker_side: list[float] = field(default_factory=list)  # enqueued -> started, ms
    http: list[float] = field(default_factory=list)  # submit answered, ms
    direct: list[float] = field(default_factory=list)


def sequential_jobs(stack: Any, jobs: int, warmup: int = 4) -> Sequential:
    """``jobs`` jobs one after the other on an idle stack, submitted alternately over HTTP
    and through the handler in this process (so machine load drifting during the run
    weighs on both alike); each waited for until final before the next."""
    from devstack.stack import DEV_TENANT
    from pagefleet.runtime import RUNTIME

    store = RUNTIME.job_services(stack.worker_settings).store
    body = tiny_job(stack.site_url)
    direct = direct_submitter(stack)
    out = Sequential()
    with stack.client() as api:
        for index in range(jobs + warmup):
            over_http = index % 2 == 0
            if over_http:
                t0 = time.perf_counter()
                job_id = api.submit(body).job_id
                submit_ms = (time.perf_counter() - t0) * 1000
            else:
                job_id, submit_ms = direct()
            while True:
                record = store.get(DEV_TENANT, job_id, consistent=False)
                if record.status.is_final:
                    break
                time.sleep(0.02)
            if index < warmup or record.started_at is None:
                continue  # warm-up: first contexts, first connections, both paths
            created, started = epoch(record.created_at), epoch(record.started_at)
            out.delays.append((started - created) * 1000)
            if record.enqueued_at is not None:
                enqueued = epoch(record.enqueued_at)
                out.api_side.append((enqueued - created) * 1000)
                out.worker_side.append((started - enqueued) * 1000)
            (out.http if over_http else out.direct).append(submit_ms)
            time.sleep(0.05)  # idle between jobs, as a lone submission finds the stack
    return out


def bursts(stack: Any, count: int, seed: int = 7) -> list[float]:
    """``count`` bursts of one job per slot, each submitted to an idle worker; per burst,
    created -> started of the job that started last, ms."""
    import random

    from devstack.local_settings import LOCAL_POLL_WAIT_S
    from devstack.stack import DEV_TENANT
    from pagefleet.runtime import RUNTIME

    assert stack.worker_settings is not None
    store = RUNTIME.job_services(stack.worker_settings).store
    slots = stack.worker_settings.concurrency
    body = tiny_job(stack.site_url)
    rng = random.Random(seed)
    out: list[float] = []
    with stack.client() as api:
        for _ in range(count):
            # Idle: every slot waits in the long polls, caught at a random point of them.
            time.sleep(0.5 + rng.random() * LOCAL_POLL_WAIT_S)
            job_ids = [api.submit(body).job_id for _ in range(slots)]
            last = 0.0
            for job_id in job_ids:
                record = store.get(DEV_TENANT, job_id, consistent=False)
                while not record.status.is_final:
                    time.sleep(0.02)
                    record = store.get(DEV_TENANT, job_id, consistent=False)
                if record.started_at is not None:
                    delay = epoch(record.started_at) - epoch(record.created_at)
                    last = max(last, delay * 1000)
            out.append(last)
    return out


# --- 4. cold imports ---------------------------------------------------------------------------
def lambda_env(task_root: str, *, pyc: bool = False) -> dict[str, str]:
    """A child Python's environment as the Lambda runtime would set it (``LAMBDA_ENV``),
    compiling every module from source as a cold start does (no ``.pyc`` read or written);
    ``pyc``: reading and writing them in a prefix of its own instead."""
    env = {k: v for k, v in python_env().items() if k not in NOT_IN_LAMBDA}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    bytecode = {"PYTHONPYCACHEPREFIX": str(Path(task_root) / "pycache")}
    if not pyc:
        bytecode["PYTHONDONTWRITEBYTECODE"] = "1"
    return {**env, **LAMBDA_ENV, **bytecode, "LAMBDA_TASK_ROOT": task_root}


def _run_once(code: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of a fresh Python running ``code``. The CPU time (user + system
    of the child) moves far less than the wall time when other work shares the cores."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([python(), "-c", code], env=env, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _importtime(code: str, env: dict[str, str]) -> dict[str, float]:
    """module -> its own import time in seconds, from ``python -X importtime``."""
    result = subprocess.run(
        [python(), "-X", "importtime", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, float] = {}
    for line in result.stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = line[len("import time:") :].split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue
        out[fields[2].strip()] = int(fields[0]) / 1e6
    return out


def above_floor(module: str, env: dict[str, str], runs: int = 3) -> list[tuple[str, float, int]]:
    """What ``module`` imports that the floor does not, grouped by package (two dotted
    levels), by summed self time: (group, seconds, modules). Median of ``runs``."""
    floor = set(_importtime(FLOOR, env))
    samples: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for _ in range(runs):
        groups: dict[str, float] = {}
        members: dict[str, int] = {}
        for name, seconds in _importtime(f"import {module}", env).items():
            if name in floor:
                continue
            group = ".".join(name.split(".")[:2])
            groups[group] = groups.get(group, 0.0) + seconds
            members[group] = members.get(group, 0) + 1
        for group, seconds in groups.items():
            samples.setdefault(group, []).append(seconds)
        counts.update(members)
    rows = [(g, statistics.median(v), counts[g]) for g, v in samples.items()]
    return sorted(rows, key=lambda row: -row[1])


def cold_imports(runs: int, *, pyc: bool = False) -> None:
    """Fresh interpreters in a Lambda-like environment, the floor and each handler in turn,
    ``runs`` rounds: machine load drifting during the run weighs on all alike."""
    with tempfile.TemporaryDirectory(prefix="lambda-task-root-") as task_root:
        _cold_imports(runs, lambda_env(task_root, pyc=pyc), pyc=pyc)


def _cold_imports(runs: int, env: dict[str, str], *, pyc: bool) -> None:
    codes = {"(interpreter)": "pass", "(floor)": FLOOR, "(floor + Tracer)": FLOOR + TRACER}
    codes.update({m: f"import {m}" for m in HANDLERS})
    if pyc:  # an uncounted round writes every module's .pyc
        for code in codes.values():
            _run_once(code, env)
    times: dict[str, list[float]] = {name: [] for name in codes}
    cpu_times: dict[str, list[float]] = {name: [] for name in codes}
    for _ in range(runs):
        for name, code in codes.items():
            wall, used = _run_once(code, env)
            times[name].append(wall)
            cpu_times[name].append(used)
    median = {name: statistics.median(values) for name, values in times.items()}
    cpu = {name: statistics.median(values) for name, values in cpu_times.items()}
    floor, cpu_floor = median["(floor)"], cpu["(floor)"]
    print(
        f"\ncold import, fresh python, median of {runs} interleaved rounds "
        f"(interpreter start {median['(interpreter)'] * 1000:.0f} ms included), in a "
        "Lambda-like environment (LAMBDA_TASK_ROOT set: the Tracer is on and patches; "
        + (
            "with .pyc for every module):"
            if pyc
            else "no .pyc: every module compiled from source):"
        )
    )
    print(f"load average {os.getloadavg()[0]:.1f}; wall time, then CPU time (user + system):")
    print(
        f"  floor (boto3 + pydantic + APIGatewayRestResolver) = {floor:.2f} s "
        f"(CPU {cpu_floor:.2f} s)"
    )
    traced = "(floor + Tracer)"
    print(
        f"  floor + a Powertools Tracer (X-Ray SDK) = {median[traced]:.2f} s "
        f"(floor {median[traced] - floor:+.2f} s; CPU floor {cpu[traced] - cpu_floor:+.2f} s)"
    )
    for module in HANDLERS:
        print(
            f"  {module:32} = {median[module]:.2f} s  (floor {median[module] - floor:+.2f} s; "
            f"CPU floor {cpu[module] - cpu_floor:+.2f} s; target floor + 0.15 s)"
        )
    rows = above_floor("functions.api.handler", env)
    total = sum(seconds for _, seconds, _ in rows)
    print(f"  functions.api.handler imports {total * 1000:.0f} ms above the floor (self times):")
    for group, seconds, count in rows[:15]:
        print(f"    {seconds * 1000:6.1f} ms  {group} ({count} modules)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="0: the cold imports only")
    parser.add_argument("--import-runs", type=int, default=7)
    parser.add_argument("--bursts", type=int, default=10, help="bursts on an idle worker")
    parser.add_argument("--skip-imports", action="store_true")
    parser.add_argument("--pyc", action="store_true", help="cold imports with .pyc files")
    args = parser.parse_args(argv)
    if args.import_runs < 1:
        parser.error("--import-runs must be at least 1 (--skip-imports skips the cold imports)")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

    from devstack.stack import LocalStack

    if args.jobs <= 0:  # cold imports only: from source, then as the shipped .pyc load
        cold_imports(args.import_runs, pyc=False)
        cold_imports(args.import_runs, pyc=True)
        return 0
    print(f"{os.cpu_count()} CPUs; idle local stack, one worker with two slots")
    with LocalStack(api_port=0, workers=1, concurrency=2) as stack:
        run = sequential_jobs(stack, args.jobs)
        burst = bursts(stack, args.bursts) if args.bursts > 0 else []
        stack.cleanup_logs()
    delays = run.delays
    p50, p99 = pct(delays, 50), pct(delays, 99)
    verdict = "meets" if p50 <= TARGET_P50_MS and p99 <= TARGET_P99_MS else "misses"
    print(
        f"queue delay p50 = {p50:.0f} ms, p99 = {p99:.0f} ms, max = {max(delays):.0f} ms "
        f"({len(delays)} sequential jobs; {verdict} p50 <= {TARGET_P50_MS}, "
        f"p99 <= {TARGET_P99_MS})"
    )
    print(
        f"  of which API (created -> enqueued) p50 = {pct(run.api_side, 50):.0f} ms, "
        f"p99 = {pct(run.api_side, 99):.0f} ms; worker (enqueued -> claimed) p50 = "
        f"{pct(run.worker_side, 50):.0f} ms, p99 = {pct(run.worker_side, 99):.0f} ms"
    )
    print(
        f"submit latency in-process p50 = {pct(run.direct, 50):.1f} ms, "
        f"p99 = {pct(run.direct, 99):.1f} ms ({len(run.direct)} calls of the handler)"
    )
    print(
        f"submit latency over HTTP p50 = {pct(run.http, 50):.1f} ms, "
        f"p99 = {pct(run.http, 99):.1f} ms ({len(run.http)} requests)"
    )
    if burst:
        print(
            f"burst on an idle worker (one job per slot, {len(burst)} bursts): the last to "
            f"start waited p50 = {pct(burst, 50):.0f} ms, max = {max(burst):.0f} ms"
        )
    if not args.skip_imports:
        cold_imports(args.import_runs, pyc=args.pyc)
    return 0


if __name__ == "__main__":
    with Measured("bench/latency.py"):
        code = main()
    sys.exit(code)
