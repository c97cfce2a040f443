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
- a few jobs cancelled while running, a few poison messages on the jobs queue;
- schedules firing, dependent jobs, webhooks to a receiver that fails a third of the time,
  live followers that reconnect, priorities mixed (``bench/chaos_traffic.py``, each checked);
- interactive browser sessions opened, stepped, closed, abandoned and killed mid-step
  (``bench/chaos_sessions.py``);
- the embedded AWS answering as AWS sometimes does (``devstack.strict_aws.at_least_once``):
  standard queues delivering some messages twice, new items missed by eventually consistent
  reads, DynamoDB batches left part done, SQS and EventBridge batches with a failed entry,
  and the local event sources invoking some events twice, as Lambda may
  (``devstack.repeated_invocations``); the report says how many of each it made.

``--parts N --record FILE [--resume]`` runs the jobs as N parts on a fresh stack each and
adds them up (``bench/chaos_parts.py``): how the 2,000-job run fits in a working session.
``--keep-logs DIR`` keeps each part's logs (every process's) and its killed jobs' times, to
find where a slow recovery's time went.

Like ECS, the bench keeps ``--workers`` workers running: one that exits on its own (its
Chromium killed while it launched, say) is replaced too, and counted.

Then it waits until every job is settled, runs the sweeper once more, and prints the
report: the final states, every job that ended otherwise than its kind should (with why),
and the recovery of a killed worker's jobs cut in two, kill -> lease end (what the lease
costs) and lease end -> next attempt (what finding and restarting the job costs), and
apart, the recoveries no other fault held up (a freeze of the embedded AWS stops every
take-back and start; a job whose site's breaker is open waits for the site). Exit
status 1 if a job was lost or has more than one final result, or a check of the traffic
failed. The last line is the verdict: ``chaos: N jobs, L lost, D doubled; schedules S fired
once each; webhooks W delivered, M missing; live gaps G; sessions X with Y steps: T run
twice, P lost, Z leftovers``. Timings are printed, never
asserted; the load average is printed beside them.

To add a kind of job: a body builder in ``devstack/chaos.py``, its expected final state
in ``EXPECTED`` (``bench/chaos_report.py``), and its share in ``job_kinds``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from rich.console import Console

from bench.chaos_parts import add_part_arguments, part_record, print_sessions, run_parts
from bench.chaos_report import Kill, Run, load, print_report, recovery_samples
from bench.chaos_sessions import SessionTraffic
from bench.chaos_traffic import LAMBDA_ENV, Traffic, print_findings
from bench.common import Measured
from devstack.chaos import (
    SETTLED,
    ChaosSite,
    audit,
    aws_fault_env,
    breaker_deferrals,
    chaos_worker_env,
    flaky_job,
    hang_job,
    held_by,
    injected_faults,
    kill_chromium,
    kill_worker,
    live_workers,
    page_job,
    record_store,
    replace_exited,
    sqs_client,
)
from devstack.pollers import scheduled_event
from devstack.processes import ManagedProcess
from devstack.stack import DEV_TENANT, LocalStack
from devstack.strict_aws import MADE_PATH, at_least_once
from pagefleet.client import ApiError, PagefleetClient
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus

console = Console()


# --- submitting -------------------------------------------------------------------------------
def submit(client: PagefleetClient, run: Run, kind: str, body: dict[str, Any], key: str) -> str:
    """Submit like a patient client: back off on 429 / 5xx, same idempotency key."""
    wait = 0.5
    for _ in range(20):
        try:
            job_id = client.submit(body, idempotency_key=key).job_id
        except ApiError as exc:
            run.submit_errors[f"{exc.status}"] += 1
            if exc.status < 500 and exc.status != 429:
                raise
            time.sleep(wait)
            wait = min(4.0, wait * 2)
            continue
        with run.lock:
            run.kinds[job_id] = kind
        return job_id
    raise RuntimeError(f"submit {key} kept failing")


def job_kinds(jobs: int, rng: random.Random) -> tuple[list[str], int]:
    """The shuffled kinds of the plain submissions, and how many flaky jobs go among them."""
    n_hang = max(2, jobs * 2 // 100)
    n_cancel = max(2, jobs * 2 // 100)
    n_flaky = max(6, jobs * 6 // 100)
    kinds = ["hang"] * n_hang + ["cancel"] * n_cancel
    kinds += ["page"] * (jobs - len(kinds) - n_flaky)
    rng.shuffle(kinds)
    return kinds, n_flaky


def body_of(kind: str, site: ChaosSite, n: int, rng: random.Random) -> dict[str, Any]:
    if kind == "page":
        return page_job(site, f"job-{n}", sleep_ms=rng.choice([0, 300, 1000, 2500]))
    if kind == "hang":
        return hang_job(site, f"hang-{n}", job_timeout_s=3)
    return page_job(site, f"cancel-{n}", sleep_ms=20_000)


def submitter(
    args: argparse.Namespace, stack: LocalStack, site: ChaosSite, run: Run, traffic: Traffic
) -> None:
    rng = random.Random(7)
    client = stack.client()
    kinds, n_flaky = job_kinds(args.jobs, rng)
    # The flaky jobs go in together, a tenth of the way in, while their site is down.
    flaky_at = set(range(len(kinds) // 10, len(kinds) // 10 + n_flaky))
    to_cancel: list[tuple[float, str]] = []
    for n, kind in enumerate(kinds):
        if n in flaky_at:
            if not site.outage_on:
                site.outage(args.outage)
            submit(client, run, "flaky", flaky_job(site, f"flaky-{n}"), f"flaky-{n}")
        body = traffic.dress(body_of(kind, site, n, rng))
        job_id = submit(client, run, kind, body, f"job-{n}")
        traffic.submitted(job_id, kind, body)
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


# --- faults -----------------------------------------------------------------------------------
def chaos(args: argparse.Namespace, stack: LocalStack, run: Run, stop: threading.Event) -> None:
    rng = random.Random(11)
    store = record_store(stack)
    next_kill = time.monotonic() + args.kill_every
    next_chromium = time.monotonic() + args.chromium_kill_every / 2
    while not stop.wait(0.5):
        run.worker_exits += replace_exited(stack, run.accounted)
        now = time.monotonic()
        if now >= next_chromium:
            next_chromium = now + args.chromium_kill_every
            workers = live_workers(stack)
            victim = rng.choice(workers) if workers else None
            if victim is not None and kill_chromium(victim):
                run.chromium_kills += 1
                wid = f"local-worker-{stack.worker_processes.index(victim)}"
                run.chromium_killed_at.append((wid, time.time()))
                run.browser_killed |= {r.job_id for r in held_by(stack, store, victim)}
        if now >= next_kill:
            next_kill = now + args.kill_every
            workers = live_workers(stack)
            if workers:
                kill_one(stack, store, run, rng.choice(workers))


def kill_one(stack: LocalStack, store: Any, run: Run, victim: ManagedProcess) -> None:
    kill_worker(victim)
    at = time.time()
    # Read after the kill: a job claimed just before it is one of the victim's too.
    held = held_by(stack, store, victim)
    run.accounted.add(id(victim))
    run.kills += 1
    stack.start_worker()
    with run.lock:
        for record in held:
            run.killed[record.job_id] = Kill(at, record.attempt, record.lease_expires_at)
    threading.Thread(target=follow_killed, args=(stack, run, held), daemon=True).start()


def epoch(stamp: str | None) -> float | None:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None


def follow_killed(stack: LocalStack, run: Run, held: list[JobRecord]) -> None:
    """Until each job of a killed worker settles: when it was taken back (seen within a
    quarter of a second), when its next attempt started (the claim's own stamp), or when it
    ended without one."""
    store = record_store(stack)
    pending = {r.job_id: r.attempt for r in held}
    deadline = time.monotonic() + 900
    while pending and time.monotonic() < deadline:
        for job_id, attempt in list(pending.items()):
            record = store.get(DEV_TENANT, job_id)
            moved = record.attempt > attempt or record.status is not JobStatus.RUNNING
            if moved and job_id not in run.taken_back:
                # Taken back by a lease watch or the sweeper (or already started again).
                run.taken_back[job_id] = time.time()
            if record.attempt > attempt and job_id not in run.next_attempt:
                run.next_attempt[job_id] = epoch(record.started_at) or time.time()
            if record.status in SETTLED:
                ended = epoch(record.finished_at or record.updated_at) or time.time()
                run.settled_at[job_id] = ended
                run.next_attempt.setdefault(job_id, ended)
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


# --- the run ---------------------------------------------------------------------------------
def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500, help="plain jobs in all parts")
    parser.add_argument("--workers", type=int, default=2, help="workers kept running")
    parser.add_argument("--rate", type=float, default=4.0, help="submissions per second")
    parser.add_argument("--outage", type=float, default=60.0, help="seconds of 503")
    parser.add_argument("--kill-every", type=float, default=20.0)
    parser.add_argument("--chromium-kill-every", type=float, default=15.0)
    parser.add_argument("--fault-rate", type=float, default=0.1)
    parser.add_argument("--poison", type=int, default=3)
    parser.add_argument("--settle-timeout", type=float, default=600.0)
    parser.add_argument("--sessions", type=int, default=2, help="session drivers at once")
    parser.add_argument(
        "--keep-logs",
        type=Path,
        help="keep each part's logs and its recoveries' times (recoveries.json) in a folder here",
    )
    add_part_arguments(parser)
    return parser.parse_args()


def run_part(args: argparse.Namespace, jobs: int) -> dict[str, Any]:
    """One part: a fresh stack, ``jobs`` plain jobs with the traffic and the faults; its
    report printed, its record (``bench/chaos_parts.py``) returned."""
    args = argparse.Namespace(**{**vars(args), "jobs": jobs})
    site = ChaosSite().start()
    log_dir = None
    if args.keep_logs:
        log_dir = args.keep_logs / f"part-{time.strftime('%H%M%S', time.gmtime())}"
    stack = LocalStack(
        api_port=0,
        log_dir=log_dir,
        workers=args.workers,
        concurrency=2,
        sweeper_interval_s=10,
        strict=at_least_once(),  # standard queues deliver some messages twice, as SQS may
        worker_env=chaos_worker_env(**aws_fault_env(args.fault_rate)),
        # INFO: the sweeper's lines name the jobs it took back.
        lambda_env={**aws_fault_env(args.fault_rate), "POWERTOOLS_LOG_LEVEL": "INFO", **LAMBDA_ENV},
    )
    run = Run()
    started = time.monotonic()
    load_at_start = load()
    console.print(f"load average (1, 5, 15 min) at the start: {load_at_start}")
    try:
        with stack:
            store = record_store(stack)
            console.print(f"stack up; logs in {stack.log_dir}")
            send_poison(stack, run, args.poison)
            traffic = Traffic(stack, site).start(minutes=args.jobs / args.rate / 60)
            sessions = SessionTraffic(stack, site, args.sessions).start()
            stop = threading.Event()

            def submit_all() -> None:
                try:
                    submitter(args, stack, site, run, traffic)
                finally:
                    stop.set()

            # Chaos runs on the main thread: it starts the replacement workers, and a child
            # gets SIGTERM when the *thread* that started it exits (PR_SET_PDEATHSIG).
            submit_thread = threading.Thread(target=submit_all)
            submit_thread.start()
            chaos(args, stack, run, stop)
            submit_thread.join()
            sessions.stop()
            traffic.stop_schedules()
            console.print(f"submitted {len(run.kinds)} jobs in {time.monotonic() - started:.0f} s")
            deadline = time.monotonic() + args.settle_timeout
            while time.monotonic() < deadline:
                report = audit(store, list(run.kinds))
                if not report.lost:
                    break
                pending = Counter(report.records[j].status.value for j in report.lost)
                console.print(f"waiting for {len(report.lost)} jobs: {dict(pending)}")
                run.worker_exits += replace_exited(stack, run.accounted)
                time.sleep(5)
            sessions.settle(args.settle_timeout)
            # One more sweep, as the minute timer would, then the final look.
            stack.functions["sweeper"].invoke(scheduled_event())
            time.sleep(3)
            report = audit(store, list(run.kinds))
            found = traffic.findings(
                store, traffic.settle(store, args.settle_timeout, console.print)
            )
            session_found = sessions.findings(
                store, lambda: stack.functions["sweeper"].invoke(scheduled_event())
            )
            elapsed = time.monotonic() - started
            faults = (
                injected_faults(stack.function_logs()["api"]),
                injected_faults(*(p.log_path for p in stack.worker_processes)),
            )
            dlq = stack.sources.dead_letters.handled if stack.sources else 0
            with httpx.Client(trust_env=False, timeout=10) as http:
                made = http.get(stack.aws_endpoint + MADE_PATH).json()
            # The local event sources' rule (devstack.repeated_invocations), not moto's.
            made["events Lambda invoked twice"] = (
                stack.sources.invoked_twice.chosen if stack.sources else 0
            )
            run.frozen = list(traffic.pauses.windows)
            run.breaker_deferred = breaker_deferrals(stack.log_dir.glob("worker-*.log"))
            traffic.stop()
    finally:
        site.stop()
    print_report(run, report, elapsed, site, faults, dlq)
    told = ", ".join(f"{count} {what}" for what, count in made.items())
    console.print(f"the embedded AWS, as AWS may answer: {told}")
    if log_dir is not None:
        keep_recoveries(run, log_dir / "recoveries.json")
    print_findings(console, found)
    print_sessions(console, session_found)
    return part_record(
        jobs=len(run.kinds) + found.jobs,
        lost=len(report.lost) + len(found.lost),
        doubled=len(report.doubled) + len(found.doubled),
        found=found,
        sessions=session_found,
        samples=recovery_samples(run),
        killed=len(run.killed),
        load=(load_at_start, load()),
        elapsed=elapsed,
    )


def keep_recoveries(run: Run, path: Path) -> None:
    """Each killed worker's job's times (epoch s), to read beside the kept logs."""
    jobs = {
        job_id: {
            "killed": kill.at,
            "attempt": kill.attempt,
            "lease_end": kill.lease_end,
            "taken_back": run.taken_back.get(job_id),
            "next_attempt": run.next_attempt.get(job_id),
            "settled": run.settled_at.get(job_id),
            "breaker_deferred": run.breaker_deferred.get(job_id, []),
        }
        for job_id, kill in run.killed.items()
    }
    faults = {"frozen": run.frozen, "chromium_killed": run.chromium_killed_at}
    path.write_text(json.dumps({"jobs": jobs, **faults}, indent=1))


def main() -> int:
    args = arguments()
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    with Measured("bench/chaos.py") as measured:
        # The load after, then the verdict: the verdict stays the last line.
        return run_parts(args, run_part, before_verdict=measured.end)


if __name__ == "__main__":
    sys.exit(main())
