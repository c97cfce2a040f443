"""Chaos run: many jobs through the local stack while workers, browsers, the site and AWS fail.

    .venv/bin/python bench/chaos.py [--jobs 500] [--outage 60] [--kill-every 20]

One local stack (moto, gateway, 2 workers x 2 slots on a 10 s lease, real Chromium), a
target site on 127.0.0.1, and at once:
- a worker SIGKILLed (with its Chromium) every ``--kill-every`` s, and a new one started;
- a worker's Chromium SIGKILLed every ``--chromium-kill-every`` s;
- jobs on a page that never answers (job_timeout_s 3 -> timed_out by name);
- a site answering 503 for ``--outage`` s (breaker opens, its jobs are deferred);
- ``--fault-rate`` of AWS calls failing in the workers and the API (throttling, 5xx, lost
  replies);
- a few jobs cancelled while running, a few poison messages on the jobs queue.

Then it waits until every job is settled, runs the sweeper once more, and prints the
report. Exit status 1 if a job was lost or has more than one final result. Timings are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from devstack.chaos import (
    SETTLED,
    ChaosSite,
    audit,
    aws_fault_env,
    chaos_worker_env,
    flaky_job,
    hang_job,
    injected_faults,
    kill_chromium,
    kill_worker,
    live_workers,
    page_job,
    record_store,
    sqs_client,
)
from devstack.pollers import scheduled_event
from devstack.stack import DEV_TENANT, LocalStack
from pagefleet.client import ApiError, PagefleetClient
from pagefleet.jobs.states import JobStatus

console = Console()
EXPECTED = {
    "page": JobStatus.SUCCEEDED,
    "flaky": JobStatus.SUCCEEDED,
    "hang": JobStatus.TIMED_OUT,
    "cancel": JobStatus.CANCELLED,
}


@dataclass
class Run:
    kinds: dict[str, str] = field(default_factory=dict)  # job id -> kind
    submit_errors: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    chromium_kills: int = 0
    killed_jobs: dict[str, float] = field(default_factory=dict)  # job id -> kill time
    recovered_next: dict[str, float] = field(default_factory=dict)  # -> next attempt start
    recovered_final: dict[str, float] = field(default_factory=dict)  # -> final state
    poison_sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def submit(client: PagefleetClient, run: Run, kind: str, body: dict[str, Any], key: str) -> str:
    for _ in range(8):
        try:
            job_id = client.submit(body, idempotency_key=key).job_id
        except ApiError as exc:
            run.submit_errors[f"{exc.status}"] += 1
            if exc.status < 500 and exc.status != 429:
                raise
            time.sleep(0.5)
            continue
        with run.lock:
            run.kinds[job_id] = kind
        return job_id
    raise RuntimeError(f"submit {key} kept failing")


def submitter(args: argparse.Namespace, stack: LocalStack, site: ChaosSite, run: Run) -> None:
    rng = random.Random(7)
    client = stack.client()
    n_hang = max(2, args.jobs * 2 // 100)
    n_cancel = max(2, args.jobs * 2 // 100)
    n_flaky = max(6, args.jobs * 6 // 100)
    kinds = ["hang"] * n_hang + ["cancel"] * n_cancel
    kinds += ["page"] * (args.jobs - len(kinds) - n_flaky)
    rng.shuffle(kinds)
    flaky_at = set(range(len(kinds) // 10, len(kinds) // 10 + n_flaky))
    to_cancel: list[tuple[float, str]] = []
    flaky_left = n_flaky
    for n, kind in enumerate(kinds):
        if n in flaky_at and flaky_left:
            if not site.outage_on:
                site.outage(args.outage)
            submit(client, run, "flaky", flaky_job(site, f"flaky-{n}"), f"flaky-{n}")
            flaky_left -= 1
        if kind == "page":
            body = page_job(site, f"job-{n}", sleep_ms=rng.choice([0, 300, 1000, 2500]))
        elif kind == "hang":
            body = hang_job(site, f"hang-{n}", job_timeout_s=3)
        else:
            body = page_job(site, f"cancel-{n}", sleep_ms=20_000)
        job_id = submit(client, run, kind, body, f"job-{n}")
        if kind == "cancel":
            to_cancel.append((time.monotonic() + rng.uniform(0.5, 4), job_id))
        for due, cancel_id in list(to_cancel):
            if due <= time.monotonic():
                to_cancel.remove((due, cancel_id))
                cancel(client, cancel_id)
        time.sleep(1 / args.rate)
    for due, cancel_id in to_cancel:
        time.sleep(max(0.0, due - time.monotonic()))
        cancel(client, cancel_id)
    client.close()


def cancel(client: PagefleetClient, job_id: str) -> None:
    for _ in range(5):
        try:
            client._request("POST", f"/v1/jobs/{job_id}/cancel")
            return
        except ApiError as exc:
            if exc.status < 500:
                return  # already final: it finished before the cancel
            time.sleep(0.5)


def chaos(args: argparse.Namespace, stack: LocalStack, run: Run, stop: threading.Event) -> None:
    rng = random.Random(11)
    store = record_store(stack)
    next_kill = time.monotonic() + args.kill_every
    next_chromium = time.monotonic() + args.chromium_kill_every / 2
    while not stop.wait(0.5):
        now = time.monotonic()
        if now >= next_chromium:
            next_chromium = now + args.chromium_kill_every
            workers = live_workers(stack)
            if workers and kill_chromium(rng.choice(workers)):
                run.chromium_kills += 1
        if now >= next_kill:
            next_kill = now + args.kill_every
            workers = live_workers(stack)
            if not workers:
                continue
            victim = rng.choice(workers)
            wid = f"local-worker-{stack.worker_processes.index(victim)}/"
            records, _ = store.list_page(
                DEV_TENANT, status=JobStatus.RUNNING, limit=100, start_key=None
            )
            held = {r.job_id: r.attempt for r in records if (r.lease_owner or "").startswith(wid)}
            kill_worker(victim)
            at = time.monotonic()
            run.kills += 1
            stack.start_worker()
            with run.lock:
                for job_id in held:
                    run.killed_jobs[job_id] = at
            threading.Thread(target=follow_killed, args=(stack, run, held, at), daemon=True).start()


def follow_killed(stack: LocalStack, run: Run, held: dict[str, int], killed_at: float) -> None:
    store = record_store(stack)
    pending = dict(held)
    deadline = killed_at + 900
    while pending and time.monotonic() < deadline:
        for job_id, attempt in list(pending.items()):
            record = store.get(DEV_TENANT, job_id)
            now = time.monotonic() - killed_at
            if record.attempt > attempt and job_id not in run.recovered_next:
                run.recovered_next[job_id] = now
            if record.status in SETTLED:
                run.recovered_final[job_id] = now
                run.recovered_next.setdefault(job_id, now)
                del pending[job_id]
        time.sleep(0.25)


def send_poison(stack: LocalStack, run: Run, count: int) -> None:
    assert stack.provisioned is not None
    sqs = sqs_client(stack)
    for n in range(count):
        sqs.send_message(
            QueueUrl=stack.provisioned.queue_urls["standard"], MessageBody=f"poison #{n} {{"
        )
        run.poison_sent += 1


def pct(values: list[float], q: int) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f} s"
    return f"{statistics.quantiles(values, n=100, method='inclusive')[q - 1]:.1f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rate", type=float, default=4.0, help="submissions per second")
    parser.add_argument("--outage", type=float, default=60.0, help="seconds of 503")
    parser.add_argument("--kill-every", type=float, default=20.0)
    parser.add_argument("--chromium-kill-every", type=float, default=15.0)
    parser.add_argument("--fault-rate", type=float, default=0.1)
    parser.add_argument("--poison", type=int, default=3)
    parser.add_argument("--settle-timeout", type=float, default=600.0)
    args = parser.parse_args()
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

    site = ChaosSite().start()
    stack = LocalStack(
        api_port=0,
        workers=2,
        concurrency=2,
        sweeper_interval_s=10,
        worker_env=chaos_worker_env(**aws_fault_env(args.fault_rate)),
        lambda_env=aws_fault_env(args.fault_rate),
    )
    run = Run()
    started = time.monotonic()
    try:
        with stack:
            store = record_store(stack)
            console.print(f"stack up; logs in {stack.log_dir}")
            send_poison(stack, run, args.poison)
            stop = threading.Event()

            def submit_all() -> None:
                try:
                    submitter(args, stack, site, run)
                finally:
                    stop.set()

            # Chaos runs on the main thread: it starts the replacement workers, and a child
            # gets SIGTERM when the *thread* that started it exits (PR_SET_PDEATHSIG).
            submit_thread = threading.Thread(target=submit_all)
            submit_thread.start()
            chaos(args, stack, run, stop)
            submit_thread.join()
            took = time.monotonic() - started
            console.print(f"submitted {len(run.kinds)} jobs in {took:.0f} s")
            deadline = time.monotonic() + args.settle_timeout
            while time.monotonic() < deadline:
                report = audit(store, list(run.kinds))
                if not report.lost:
                    break
                pending = Counter(report.records[j].status.value for j in report.lost)
                console.print(f"waiting for {len(report.lost)} jobs: {dict(pending)}")
                time.sleep(5)
            # One more sweep, as the minute timer would, then the final look.
            stack.functions["sweeper"].invoke(scheduled_event())
            time.sleep(3)
            report = audit(store, list(run.kinds))
            elapsed = time.monotonic() - started
            api_faults = injected_faults(stack.function_logs()["api"])
            dlq_handled = stack.sources.dead_letters.handled if stack.sources else 0
            worker_faults = injected_faults(*(p.log_path for p in stack.worker_processes))
    finally:
        site.stop()

    unexpected = Counter(
        f"{run.kinds[j]}->{r.status.value}"
        for j, r in report.records.items()
        if r.status is not EXPECTED[run.kinds[j]]
        and not (run.kinds[j] == "cancel" and r.status is JobStatus.SUCCEEDED)
    )
    table = Table(title=f"chaos run: {len(run.kinds)} jobs in {elapsed:.0f} s")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows: list[tuple[str, str]] = [
        ("submitted", str(len(run.kinds))),
        (
            "  of which page / flaky(503) / hang / cancel",
            " / ".join(
                str(Counter(run.kinds.values())[k]) for k in ("page", "flaky", "hang", "cancel")
            ),
        ),
        ("succeeded", str(report.count(JobStatus.SUCCEEDED))),
        (
            "failed / timed_out",
            f"{report.count(JobStatus.FAILED)} / {report.count(JobStatus.TIMED_OUT)}",
        ),
    ]
    rows += [(f"  {reason}", str(n)) for reason, n in sorted(report.failed_by_reason.items())]
    rows += [
        ("cancelled", str(report.count(JobStatus.CANCELLED))),
        ("expired", str(report.count(JobStatus.EXPIRED))),
        ("dead-lettered jobs", str(report.count(JobStatus.DEAD_LETTERED))),
        ("poison messages sent / DLQ messages consumed", f"{run.poison_sent} / {dlq_handled}"),
        ("unexpected final states", ", ".join(f"{k}: {v}" for k, v in unexpected.items()) or "0"),
        ("LOST (must be 0)", str(len(report.lost))),
        ("DOUBLED: >1 final result (must be 0)", str(len(report.doubled))),
        ("final entry not the last attempt's", str(len(report.inconsistent))),
        ("workers killed / Chromium killed", f"{run.kills} / {run.chromium_kills}"),
        ("killed workers' jobs", str(len(run.killed_jobs))),
        (
            "recovery to next attempt p50 / p99",
            (
                f"{pct(list(run.recovered_next.values()), 50)} / "
                f"{pct(list(run.recovered_next.values()), 99)}"
            ),
        ),
        (
            "recovery to final state p50 / p99",
            (
                f"{pct(list(run.recovered_final.values()), 50)} / "
                f"{pct(list(run.recovered_final.values()), 99)}"
            ),
        ),
        ("503 answers served", str(site.served_503)),
        ("AWS faults injected: API function / workers (logged)", f"{api_faults} / {worker_faults}"),
        (
            "submit retries (HTTP status)",
            ", ".join(f"{k}: {v}" for k, v in run.submit_errors.items()) or "0",
        ),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    if report.lost:
        console.print(
            "lost:",
            {j: report.records.get(j) and report.records[j].status.value for j in report.lost[:20]},
        )
    if report.doubled:
        console.print("doubled:", report.doubled[:20])
    return 1 if report.lost or report.doubled else 0


if __name__ == "__main__":
    sys.exit(main())
