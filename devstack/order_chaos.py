"""The order chaos run (``bench/chaos_orders.py`` and ``test_irreversible_chaos.py``): many
jobs that each place one order on the demo shop's order desk, half with a check on their
irreversible "Place order" click, while workers and Chromium are killed at random moments,
some of them right between the click and its checkpoint (the desk has recorded the order,
its answer is not sent yet), and some answers are dropped after the order was recorded.

Every job must end succeeded (exactly one order), failed before its click (no order) or in
needs_review (only a job without a check; at most one order): no order is ever doubled.
Built on ``devstack.chaos`` (kills, records, waits); everything stays on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from devstack.chaos import (
    audit,
    kill_chromium,
    kill_worker,
    live_workers,
    record_store,
    worker_by_id,
)
from devstack.demo_orders import Order, Orders
from devstack.examples import EXAMPLES_DIR, load_example
from devstack.stack import DEV_TENANT, LocalStack
from pagefleet.client import ApiError, PagefleetClient
from pagefleet.errors import NotFound
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus

PLACE_ORDER = EXAMPLES_DIR / "place-order.json"


@dataclass
class OrderChaos:
    """How hard the run shakes the fleet."""

    jobs: int = 200
    rate: float = 4.0  # submissions per second
    kill_every_s: float = 20.0  # a random worker SIGKILLed (with its Chromium)
    chromium_kill_every_s: float = 15.0  # a random worker's Chromium SIGKILLed
    kill_at_order: float = 0.08  # share of orders whose worker is killed as it is recorded
    chromium_at_order: float = 0.05  # ... whose worker's Chromium is killed then
    drop_rate: float = 0.08  # share of orders recorded and never answered
    workers: int = 2
    settle_timeout_s: float = 1800.0
    seed: int = 24


@dataclass
class OrderReport:
    """What the records and the order desk say once every job settled."""

    jobs: int
    with_check: set[str]
    statuses: Counter[str]
    doubled: list[str] = field(default_factory=list)  # jobs with more than one order
    wrong: list[str] = field(default_factory=list)  # jobs whose ending breaks the promise
    unsettled: list[str] = field(default_factory=list)
    review_with_check: int = 0
    kills: Counter[str] = field(default_factory=Counter)
    took_s: float = 0.0

    @property
    def needs_review(self) -> int:
        return self.statuses[JobStatus.NEEDS_REVIEW.value]

    @property
    def ok(self) -> bool:
        return not (self.doubled or self.wrong or self.unsettled or self.review_with_check)

    def line(self) -> str:
        who = (
            "all without check"
            if not self.review_with_check
            else f"{self.review_with_check} WITH a check"
        )
        return (
            f"orders: {self.jobs} jobs, {len(self.doubled)} doubled, "
            f"{self.needs_review} needs_review ({who})"
        )


def order_job(site_url: str, number: int, *, check: bool) -> dict[str, Any]:
    """The example order workflow; with a check it may take more attempts (its check runs
    after every one the chaos cut short), without one it has the default three."""
    body = load_example(PLACE_ORDER, site_url)
    body["name"] = f"order-{number}-{'checked' if check else 'unchecked'}"
    body["options"] = {"job_timeout_s": 60}
    if check:
        body["max_attempts"] = 10
    else:
        del body["steps"][4]["check"]
    return body


def judge(record: JobRecord, orders: list[Order]) -> str | None:
    """Why this job's ending breaks the promise (None: it keeps it)."""
    placed = len(orders)
    status = record.status
    if placed > 1:
        return f"{placed} orders"
    if status is JobStatus.SUCCEEDED:
        return None if placed == 1 else "succeeded without an order"
    if status is JobStatus.FAILED:
        clicked = any(c.state != "not_done" for c in record.checkpoints)
        if placed or clicked:
            return f"failed after its click ({placed} orders, {record.checkpoints})"
        return None
    if status is JobStatus.NEEDS_REVIEW:
        return None  # at most one order; with a check it is counted apart
    return f"ended {status.value} ({record.error.message if record.error else ''})"


class _Killer:
    """Kills the worker (or its Chromium) that is placing an order, as the desk records it:
    after the click, before the answer and so before the "done" checkpoint."""

    def __init__(self, stack: LocalStack, chaos: OrderChaos, kills: Counter[str]) -> None:
        self.stack = stack
        self.chaos = chaos
        self.kills = kills
        self.store = record_store(stack)
        self.random = random.Random(chaos.seed + 1)
        self.lock = threading.Lock()

    def __call__(self, order: Order) -> None:
        with self.lock:
            roll = self.random.random()
        worker = self.chaos.kill_at_order
        if roll >= worker + self.chaos.chromium_at_order:
            return
        with contextlib.suppress(NotFound):
            owner = self.store.get(DEV_TENANT, order.reference).lease_owner
            if not owner:
                return
            proc = worker_by_id(self.stack, owner)
            if not proc.alive():
                return
            if roll < worker:
                kill_worker(proc)
                self.kills["worker at an order"] += 1
            elif kill_chromium(proc):
                self.kills["chromium at an order"] += 1


def run_order_chaos(stack: LocalStack, chaos: OrderChaos, log: Any = print) -> OrderReport:
    """Submit ``chaos.jobs`` order jobs and shake the fleet until they are submitted, then
    wait until every job settled; the report. Runs on the caller's thread (it starts the
    replacement workers: a child is signalled when the thread that started it exits)."""
    assert stack.site is not None
    desk: Orders = stack.site.orders
    desk.reset()
    desk.set(drop_rate=chaos.drop_rate)
    kills: Counter[str] = Counter()
    desk.on_order = _Killer(stack, chaos, kills)
    rng = random.Random(chaos.seed)
    with_check: set[str] = set()
    job_ids: list[str] = []
    done = threading.Event()
    started = time.monotonic()

    def submit_all() -> None:
        try:
            with stack.client() as client:
                for number in range(chaos.jobs):
                    check = number % 2 == 0
                    job_id = _submit(client, order_job(stack.site_url, number, check=check))
                    job_ids.append(job_id)
                    if check:
                        with_check.add(job_id)
                    time.sleep(1 / chaos.rate)
        finally:
            done.set()

    submitter = threading.Thread(target=submit_all, name="order-submitter")
    submitter.start()
    try:
        _shake(stack, chaos, rng, kills, until=done)
    finally:
        submitter.join()
    store = record_store(stack)
    deadline = time.monotonic() + chaos.settle_timeout_s
    while True:
        _keep_workers(stack, chaos.workers)
        report = audit(store, job_ids)  # one read a job: the workers share the embedded AWS
        if not report.lost or time.monotonic() > deadline:
            break
        log(f"waiting for {len(report.lost)} jobs to settle: {dict(report.statuses)}")
        # Each look reads every job: a test's few dozen every second, a bench's hundreds
        # every five.
        time.sleep(1 if len(job_ids) <= 50 else 5)
    desk.on_order = None
    by_reference: dict[str, list[Order]] = {}
    for order in desk.all():
        by_reference.setdefault(order.reference, []).append(order)
    result = OrderReport(
        jobs=len(job_ids),
        with_check=with_check,
        statuses=report.statuses,
        unsettled=list(report.lost),
        kills=kills,
        took_s=time.monotonic() - started,
    )
    for job_id, record in report.records.items():
        placed = by_reference.get(job_id, [])
        if len(placed) > 1:
            result.doubled.append(job_id)
        if record.status is JobStatus.NEEDS_REVIEW and job_id in with_check:
            result.review_with_check += 1
        why = judge(record, placed)
        if why is not None:
            result.wrong.append(f"{job_id}: {why}")
    return result


def _submit(client: PagefleetClient, body: dict[str, Any]) -> str:
    for _ in range(20):
        try:
            return client.submit(body).job_id
        except ApiError as exc:
            if exc.status < 500 and exc.status != 429:
                raise
            time.sleep(0.5)
    raise RuntimeError("submitting kept failing")


def _shake(
    stack: LocalStack,
    chaos: OrderChaos,
    rng: random.Random,
    kills: Counter[str],
    *,
    until: threading.Event,
) -> None:
    """Kill workers and Chromium at random moments until ``until``; keep the fleet's size."""
    next_kill = time.monotonic() + chaos.kill_every_s
    next_chromium = time.monotonic() + chaos.chromium_kill_every_s / 2
    while not until.wait(0.5):
        _keep_workers(stack, chaos.workers)
        now = time.monotonic()
        workers = live_workers(stack)
        if now >= next_chromium and workers:
            next_chromium = now + rng.uniform(0.5, 1.5) * chaos.chromium_kill_every_s
            if kill_chromium(rng.choice(workers)):
                kills["chromium at random"] += 1
        if now >= next_kill and workers:
            next_kill = now + rng.uniform(0.5, 1.5) * chaos.kill_every_s
            kill_worker(rng.choice(workers))
            kills["worker at random"] += 1


def _keep_workers(stack: LocalStack, count: int) -> None:
    for _ in range(count - len(live_workers(stack))):
        stack.start_worker()
