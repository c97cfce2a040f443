"""The AWS requests one plain job makes, counted in the runtimes that make them.

    .venv/bin/python bench/aws_requests.py [--jobs 20] [--concurrency 2]

On the local stack (moto, real Chromium), ``--jobs`` plain jobs (open the demo site's home
page, extract its heading: no artifacts) are submitted through the API and run by one worker.
Each runtime that runs on AWS — the Lambda functions (the API, the authorizer, the stream
reader ``job_changes`` and the others) and the worker — loads ``bench/request_hook``, a
botocore ``after-call`` handler that logs every request it makes. The bench's own process
is not hooked: the local stack's stand-ins for AWS (the stream poller, the timers, the
gateway) and the bench's own reads stay out of the count. The sweeper is left to its timer
(once an hour here), as it runs once a minute whatever the jobs.

A warm-up job goes first (first connections, the authorizer's cache); the count covers the
measured jobs from submission until the stream reader has handled their last change. A
worker's long poll that comes back empty is idle capacity, not a job's request: it is
printed apart. A short poll that finds nothing is a job's request when it was made beside
one that found a job (the receiver looks at the high queue and the normal one together each
time a slot asks for a job), counted as ``sqs.ReceiveMessage(nothing)``; without one beside
it, an idle slot looked before waiting: set apart too. A transaction counts as one request
(its write units are printed: 2 per item up to 1 KB). A worker's own stop (its session
inbox deleted as the stack stops) is once a task's life: set apart too, as its start is.
Prints the requests by runtime and operation, and ends with ``AWS requests per job: <N>
(artifact uploads aside), by operation: ...``. ``--where`` splits each runtime's requests
by the function of ours that made them (outside the adapters). Asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import Measured, lift_submission_rate, ran_every_job  # noqa: E402
from devstack.stack import DEV_TENANT, LocalStack  # noqa: E402
from pagefleet.runtime import RUNTIME  # noqa: E402

HOOK_DIR = ROOT / "bench" / "request_hook"
TARGET = 10
# Artifact uploads are set aside by the target (their count follows what a job saves).
ARTIFACT_OPERATIONS = ("s3.PutObject", "s3.CreateMultipartUpload", "s3.UploadPart")
# A worker's own stop (its session inbox deleted, its entry dropped): once a task's life,
# whatever its jobs. It comes as the stack stops, inside the count; the start (the inbox
# made and registered) comes before the count begins.
WORKER_STOP_CALLERS = ("browser_task.run.inbox.stop",)
QUIET_S = 4.0  # no request from any runtime for this long: the stream reader is done


class Request(tuple[float, str, str, int, str, str]):
    @property
    def at(self) -> float:
        return self[0]

    @property
    def runtime(self) -> str:
        # Execution environments of one function share its name; workers are numbered.
        return "worker" if self[1].startswith("local-worker") else self[1]

    @property
    def operation(self) -> str:
        return self[2]

    @property
    def items(self) -> int:
        return self[3]

    @property
    def target(self) -> str:
        """The table's or queue's role (``jobs``, ``tenants``, ...), without the stack prefix."""
        return "+".join(name.rsplit("-", 1)[-1] for name in self[4].split("+") if name)

    @property
    def caller(self) -> str:
        return self[5]


def read_log(log_dir: Path) -> list[Request]:
    requests = []
    for path in log_dir.glob("*.tsv"):
        for line in path.read_text().splitlines():
            at, runtime, operation, items, target, caller = line.split("\t")[:6]
            requests.append(Request((float(at), runtime, operation, int(items), target, caller)))
    requests.sort()
    idle = idle_polls([(r.at, r[1], r.operation) for r in requests])
    return [
        Request((r.at, r[1], IDLE_RECEIVE, *r[3:])) if i in idle else r
        for i, r in enumerate(requests)
    ]


# A short poll that found nothing this close to one of the same runtime that found a job was
# made beside it (the receiver polls the high queue and the normal one together).
PAIRED_S = 0.05
IDLE_RECEIVE = "sqs.ReceiveMessage(empty)"
FOUND_NOTHING = "sqs.ReceiveMessage(nothing)"


def idle_polls(calls: list[tuple[float, str, str]]) -> set[int]:
    """Which of ``calls`` (when each ended, runtime, operation) are idle capacity: every empty
    long poll, and each short poll that found nothing with no job found beside it (an idle
    slot looking at the queues before it waits on them). A short poll beside one that found
    a job is that job's request."""
    found = [(at, who) for at, who, op in calls if op == "sqs.ReceiveMessage"]
    idle = set()
    for index, (at, who, operation) in enumerate(calls):
        beside_a_job = any(w == who and abs(a - at) <= PAIRED_S for a, w in found)
        if operation == IDLE_RECEIVE or (operation == FOUND_NOTHING and not beside_a_job):
            idle.add(index)
    return idle


class Call(tuple[float, float, str, str, str]):
    """One logged call: (began, ms it took, runtime, operation, caller)."""

    @property
    def began(self) -> float:
        return self[0]


def calls_between(log_dir: Path, start: float, end: float) -> list[Call]:
    """The calls that ended between ``start`` and ``end`` (epoch s), idle polls aside,
    in the order they began; the workers' runtimes named ``worker``."""
    rows: list[tuple[float, str, str, str, float]] = []
    for path in log_dir.glob("*.tsv"):
        for line in path.read_text().splitlines():
            ended, runtime, operation, _items, _target, caller, *took = line.split("\t")
            ms = float(took[0]) if took and took[0] else 0.0
            rows.append((float(ended), runtime, operation, caller, ms))
    idle = idle_polls([(at, who, op) for at, who, op, _, _ in rows])
    out: list[Call] = []
    for index, (at, runtime, operation, caller, ms) in enumerate(rows):
        if not start <= at <= end or index in idle:
            continue
        who = "worker" if runtime.startswith("local-worker") else runtime
        out.append(Call((at - ms / 1000, ms, who, operation, caller)))
    return sorted(out)


def print_calls(calls: list[Call], since: float) -> None:
    """Call by call: when each began after ``since``, how long it took, who made it."""
    for began, took, who, operation, caller in calls:
        if "ReceiveMessage" in operation:
            continue  # a long poll: it waits for work, it is not on a path
        at = (began - since) * 1000
        print(f"  +{at:6.1f} ms {took:6.1f} ms  {who:<22} {operation:<40} <- {caller}")


def hook_env(log_dir: Path) -> dict[str, str]:
    path = [str(HOOK_DIR), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "PAGEFLEET_BENCH_AWS_LOG": str(log_dir),
    }


def plain_job(site: str) -> dict[str, Any]:
    return {
        "name": "aws-requests",
        "max_attempts": 1,
        "steps": [
            {"action": "goto", "url": f"{site}/"},
            {"action": "extract", "name": "title", "selector": "h1"},
        ],
    }


def run_jobs(stack: LocalStack, count: int, timeout_s: float) -> int:
    """Submit ``count`` plain jobs, wait (reading the table from this unhooked process);
    returns how many succeeded."""
    assert stack.worker_settings is not None
    store = RUNTIME.job_services(stack.worker_settings).store
    with stack.client() as api:
        ids = [api.submit(plain_job(stack.site_url)).job_id for _ in range(count)]
    deadline = time.monotonic() + timeout_s
    statuses = []
    for job_id in ids:
        while not (record := store.get(DEV_TENANT, job_id, consistent=False)).status.is_final:
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} not final after {timeout_s:.0f} s")
            time.sleep(1.0)
        statuses.append(record.status.value)
    failed = [s for s in statuses if s != "succeeded"]
    if failed:
        print(f"{len(failed)} of {count} jobs did not succeed: {collections.Counter(failed)}")
    return count - len(failed)


def wait_quiet(log_dir: Path, timeout_s: float) -> None:
    """Until no runtime has made a job's request for ``QUIET_S`` (empty polls aside)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        busy = [r for r in read_log(log_dir) if not r.operation.endswith("(empty)")]
        if not busy or time.time() - busy[-1].at > QUIET_S:
            return
        time.sleep(1.0)


def report(requests: list[Request], jobs: int, where: bool = False) -> None:
    idle = [r for r in requests if r.operation.endswith("(empty)")]
    counted = [r for r in requests if r not in idle]
    artifacts = [r for r in counted if r.operation.startswith(ARTIFACT_OPERATIONS)]
    stop = [r for r in counted if r.caller in WORKER_STOP_CALLERS]
    counted = [r for r in counted if r not in artifacts and r not in stop]
    by_runtime: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for r in counted:
        by_runtime[r.runtime][
            f"{r.operation} {r.target}" + (f" <- {r.caller}" if where else "")
        ] += 1
    print(f"{jobs} plain jobs; requests per job by runtime and operation:")
    for runtime, operations in sorted(by_runtime.items()):
        print(f"  {runtime}: {sum(operations.values()) / jobs:.2f}")
        for operation, n in operations.most_common():
            print(f"      {operation:<{90 if where else 45}} {n / jobs:.2f}")
    transactions = [r for r in counted if r.operation.endswith(".TransactWriteItems")]
    if transactions:
        items = sum(r.items for r in transactions)
        print(
            f"transactions: {len(transactions) / jobs:.2f} per job, {items / jobs:.2f} items "
            f"= {2 * items / jobs:.2f} write units per job (2 per item up to 1 KB)"
        )
    print(
        f"set aside: artifact uploads {len(artifacts) / jobs:.2f} per job; "
        f"idle polls {len(idle)} in the run (empty long polls and short polls with no job "
        "beside them: idle capacity, per second, not per job); a worker's stop "
        f"{len(stop)} in the run (its session inbox deleted: per task, not per job)"
    )
    total = collections.Counter(r.operation for r in counted)
    verdict = "meets" if len(counted) / jobs <= TARGET else "misses"
    print(f"target <= {TARGET} per job: {verdict}")
    parts = ", ".join(f"{op} {n / jobs:.2f}" for op, n in total.most_common())
    per_job = len(counted) / jobs
    print(f"AWS requests per job: {per_job:.1f} (artifact uploads aside), by operation: {parts}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=2, help="the worker's slots")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument(
        "--where", action="store_true", help="split each operation by the function that made it"
    )
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="pagefleet-aws-requests-"))
    env = hook_env(log_dir)
    with LocalStack(
        api_port=0,
        workers=1,
        concurrency=args.concurrency,
        sweeper_interval_s=3600,
        worker_env=env,
        lambda_env=env,
    ) as stack:
        lift_submission_rate(stack)
        try:
            run_jobs(stack, 1, args.timeout)  # warm-up: connections, the authorizer's cache
            wait_quiet(log_dir, args.timeout)
            start = time.time()
            succeeded = run_jobs(stack, args.jobs, args.timeout)
            wait_quiet(log_dir, args.timeout)
        finally:
            stack.cleanup_logs()
    # A failed job makes fewer requests than a plain one: no figure a job from it.
    if not ran_every_job("the local stack", succeeded, args.jobs):
        return 1
    report([r for r in read_log(log_dir) if r.at >= start], args.jobs, args.where)
    return 0


if __name__ == "__main__":
    with Measured("bench/aws_requests.py"):
        code = main()
    sys.exit(code)
