"""Latency on an idle local stack: queue delay, the API's submit latency, cold imports.

    .venv/bin/python bench/latency.py [--jobs 200] [--submits 200] [--import-runs 7]

1. **Queue delay** (submit to running): ``--jobs`` jobs one after the other through the
   HTTP API on an idle stack (one worker, two slots), each waited for before the next.
   Measured from the job records: ``started_at`` (the claim) minus ``created_at`` (the API).
2. **Submit latency**: ``POST /v1/jobs`` answered, p50/p99, (a) in-process: the API
   handler invoked directly with a REST event against the embedded AWS; (b) over HTTP
   through the local gateway (authorizer cached, API in its warm execution environment).
3. **Cold imports**: each Lambda handler module imported by a fresh Python, several runs,
   median, against the floor every API function pays (boto3, Powertools' REST resolver,
   pydantic); then the imports above the floor by cumulative time (``-X importtime``).

Prints figures; asserts nothing. Everything is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import python, python_env

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


# --- 1. queue delay -------------------------------------------------------------------------
def queue_delay(stack: Any, jobs: int) -> tuple[list[float], list[float]]:
    """(queue delays ms, HTTP submit latencies ms) of ``jobs`` sequential jobs."""
    from devstack.stack import DEV_TENANT
    from pagefleet.runtime import RUNTIME

    store = RUNTIME.job_services(stack.worker_settings).store
    body = tiny_job(stack.site_url)
    delays: list[float] = []
    submits: list[float] = []
    with stack.client() as api:
        for index in range(jobs + 2):
            t0 = time.perf_counter()
            job_id = api.submit(body).job_id
            submit_ms = (time.perf_counter() - t0) * 1000
            while True:
                record = store.get(DEV_TENANT, job_id, consistent=False)
                if record.status.is_final:
                    break
                time.sleep(0.02)
            if index < 2:
                continue  # warm-up: first contexts, first connections
            if record.started_at is None:
                continue
            delays.append((epoch(record.started_at) - epoch(record.created_at)) * 1000)
            submits.append(submit_ms)
            # Idle between jobs, as a lone submission finds the stack.
            time.sleep(0.05)
    return delays, submits


# --- 2. submit latency in-process ---------------------------------------------------------------
def in_process_submits(stack: Any, count: int) -> list[float]:
    """The API handler called directly (no gateway, no HTTP) with a REST proxy event."""
    import json

    from devstack.gateway import HttpRequest, proxy_resource, rest_event
    from devstack.stack import DEV_TENANT
    from functions.api.handler import handler

    body = json.dumps(tiny_job(stack.site_url)).encode()

    def event() -> dict[str, Any]:
        request = HttpRequest(
            method="POST",
            raw_path="/v1/jobs",
            headers=[("Content-Type", "application/json"), ("Host", "127.0.0.1")],
            body=body,
            source_ip="127.0.0.1",
        )
        resource, params = proxy_resource(request.path)
        return rest_event(
            request,
            resource=resource,
            path_parameters=params,
            authorizer={"tenant_id": DEV_TENANT, "admin": "false", "principalId": DEV_TENANT},
            api_id="local",
            stage="v1",
            request_id=str(uuid.uuid4()),
        )

    # The worker runs these jobs meanwhile, as it would on AWS.
    times: list[float] = []
    for index in range(count + 3):
        ev = event()
        t0 = time.perf_counter()
        answer = handler(ev, None)
        elapsed = (time.perf_counter() - t0) * 1000
        if answer["statusCode"] != 202:
            raise RuntimeError(f"submit failed: {answer['statusCode']} {answer['body'][:200]}")
        if index >= 3:
            times.append(elapsed)
    return times


# --- 3. cold imports ---------------------------------------------------------------------------
def import_seconds(code: str, runs: int) -> float:
    """Median wall time of a fresh ``python -c CODE`` (interpreter start included)."""
    env = python_env()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([python(), "-c", code], env=env, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def import_costs(module: str, floor_code: str) -> list[tuple[str, float]]:
    """Imports of ``module`` (two levels deep) that the floor does not make, by cumulative
    import time in seconds."""
    floor = _importtime(floor_code)
    target = _importtime(f"import {module}")
    above = [
        (name, cum)
        for name, (cum, depth) in target.items()
        if name not in floor and depth <= 2 and cum > 0.005
    ]
    return sorted(above, key=lambda item: -item[1])[:15]


def _importtime(code: str) -> dict[str, tuple[float, int]]:
    """module -> (cumulative seconds, nesting depth) from ``python -X importtime``."""
    result = subprocess.run(
        [python(), "-X", "importtime", "-c", code],
        env=python_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, tuple[float, int]] = {}
    for line in result.stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = line[len("import time:") :].split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue
        cumulative_us = int(fields[1])
        raw_name = fields[2].rstrip()
        depth = (len(raw_name) - len(raw_name.lstrip(" "))) // 2
        out[raw_name.strip()] = (cumulative_us / 1e6, depth)
    return out


def cold_imports(runs: int) -> None:
    floor = import_seconds(FLOOR, runs)
    bare = import_seconds("pass", runs)
    print(f"\ncold import (fresh python, median of {runs}; interpreter start {bare * 1000:.0f} ms)")
    print(f"  floor (boto3 + pydantic + APIGatewayRestResolver): {floor:.2f} s")
    for module in HANDLERS:
        seconds = import_seconds(f"import {module}", runs)
        print(f"  {module:34} {seconds:.2f} s  (floor + {seconds - floor:+.2f} s)")
    print("  imports of functions.api.handler above the floor (cumulative, one -X importtime run):")
    for name, seconds in import_costs("functions.api.handler", FLOOR):
        print(f"    {seconds * 1000:6.0f} ms  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--submits", type=int, default=200)
    parser.add_argument("--import-runs", type=int, default=7)
    parser.add_argument("--skip-imports", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

    from devstack.stack import LocalStack

    print(f"{os.cpu_count()} CPUs; idle local stack, one worker with two slots")
    with LocalStack(api_port=0, workers=1, concurrency=2) as stack:
        delays, http_submits = queue_delay(stack, args.jobs)
        direct = in_process_submits(stack, args.submits)
        stack.cleanup_logs()
    p50, p99 = pct(delays, 50), pct(delays, 99)
    verdict = "meets" if p50 <= TARGET_P50_MS and p99 <= TARGET_P99_MS else "misses"
    print(
        f"queue delay p50 = {p50:.0f} ms, p99 = {p99:.0f} ms, max = {max(delays):.0f} ms "
        f"({len(delays)} sequential jobs; {verdict} p50 <= {TARGET_P50_MS}, "
        f"p99 <= {TARGET_P99_MS})"
    )
    print(
        f"submit latency in-process p50 = {pct(direct, 50):.1f} ms, "
        f"p99 = {pct(direct, 99):.1f} ms ({len(direct)} calls of the handler)"
    )
    print(
        f"submit latency over HTTP p50 = {pct(http_submits, 50):.1f} ms, "
        f"p99 = {pct(http_submits, 99):.1f} ms ({len(http_submits)} requests)"
    )
    if not args.skip_imports:
        cold_imports(args.import_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
