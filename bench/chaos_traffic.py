"""The chaos run's version-one traffic, beside its plain jobs (``bench/chaos.py``).

While workers, Chromium and AWS fail, everything version one added is in flight at once,
each with its own check:

- **schedules** (``rate(1 minute)`` and one-time ``at(...)``, made through the API, fired
  by the local Scheduler): each scheduled time makes exactly one job;
- **dependent jobs** (``depends_on`` a plain page job): no child starts before its parent
  succeeded (the records' timestamps), and a child whose parent did not succeed never runs;
- **webhooks** to a receiver on 127.0.0.1 that answers 500 a third of the time: every
  finished job with a webhook is delivered (a 2xx answer) at least once, with one delivery
  id for all the attempts of its ``job.finished``;
- **live followers** over the WebSocket that drop their connection every few seconds and
  subscribe again with ``after=<last seq>``, through the SDK's own protocol
  (``pagefleet.client.follow.Follower``): every event the job has stored is seen;
- **priorities** mixed over the plain jobs (high, normal, low);

and, beside the bench's own faults, the embedded AWS frozen (SIGSTOP) for ``AWS_PAUSE_S``
every ``AWS_PAUSE_EVERY_S`` while the submissions last. The probes are in
``bench/chaos_probes.py``.

The jobs made here (children, schedule runs) are audited here, for lost and doubled as the
plain ones are.
"""

from __future__ import annotations

import contextlib
import queue
import random
import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.chaos_probes import (
    AwsPauses,
    Followed,
    Hooks,
    epoch,
    follow_with_drops,
    patient,
    webhook_receiver,
)
from devstack.chaos import Audit, ChaosSite, audit, page_job
from devstack.stack import LocalStack
from pagefleet.adapters.dynamodb import DynamoJobStore
from pagefleet.adapters.scheduler import mirror_name
from pagefleet.client import ApiError
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.schedules.expressions import parse

PRIORITY_SHARES = (("high", 0.2), ("low", 0.2))  # the rest: normal
WEBHOOK_EVERY = 3  # one plain job in three names the webhook
CHILD_EVERY = 12  # one page job in twelve gets a dependent child
FOLLOW_EVERY = 15  # one job in fifteen is followed live
FOLLOWERS = 6  # followers at once (each reconnect is a live-function invocation)
RATE_SCHEDULES = 3
AT_SCHEDULES = 6
# The embedded AWS frozen this long, this often, while the submissions last (longer than the
# chaos lease: every running job's heartbeat misses it).
AWS_PAUSE_S = 12
AWS_PAUSE_EVERY_S = 150
# Webhook retries a second apart (ten by default): a failed POST is retried within the run.
LAMBDA_ENV = {"PAGEFLEET_BACKOFF_BASE_S": "1", "PAGEFLEET_BACKOFF_CAP_S": "10"}


# --- the traffic ------------------------------------------------------------------------------
@dataclass
class ScheduleMade:
    schedule_id: str
    expression: str
    # When the Scheduler got it: its fires count from then, a rate's from that instant.
    armed: datetime | None = None


@dataclass
class Findings:
    jobs: int = 0
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    scheduled_times: int = 0
    unmirrored_schedules: int = 0
    schedule_faults: list[str] = field(default_factory=list)  # times with 0 or 2+ jobs
    dependency_faults: list[str] = field(default_factory=list)
    children_waiting_on_dead_letters: int = 0
    webhooks_delivered: int = 0
    webhooks_missing: list[str] = field(default_factory=list)
    webhooks_many_ids: list[str] = field(default_factory=list)
    live_gaps: int = 0
    live_gap_jobs: list[str] = field(default_factory=list)
    followed: int = 0
    reconnects: int = 0
    followers_unfinished: int = 0
    aws_pauses: int = 0
    waits_by_priority: dict[str, list[float]] = field(default_factory=dict)


class Traffic:
    def __init__(self, stack: LocalStack, site: ChaosSite, seed: int = 23) -> None:
        self.stack = stack
        self.site = site
        self.rng = random.Random(seed)
        self.hooks = Hooks()
        self.receiver = webhook_receiver(self.hooks, random.Random(seed + 1))
        self.client = stack.client()
        self.webhook_jobs: set[str] = set()
        self.priority: dict[str, str] = {}  # plain job id -> its priority
        self.children: dict[str, str] = {}  # child job id -> parent job id
        self.schedules: list[ScheduleMade] = []
        self.schedule_jobs: dict[str, list[str]] = {}  # schedule id -> its jobs
        self.cutoff = 0.0
        self.deleted_at = 0.0  # when the schedules were deleted (after the cutoff)
        self.followed: list[Followed] = []
        self._to_follow: queue.Queue[str | None] = queue.Queue()
        self._followers: list[threading.Thread] = []
        self._n = 0
        self._lock = threading.Lock()
        self.pauses = AwsPauses(stack, AWS_PAUSE_EVERY_S, AWS_PAUSE_S)

    @property
    def hook_url(self) -> str:
        return f"{self.receiver.url}/hooks/chaos"

    # --- start ----------------------------------------------------------------------------
    def start(self, minutes: float) -> Traffic:
        """Make the schedules (one-time ones spread over ``minutes``) and start following."""
        for i in range(RATE_SCHEDULES):
            self._schedule("rate(1 minute)", f"every-minute-{i}")
        now = datetime.now(UTC)
        for i in range(AT_SCHEDULES):
            at = now + timedelta(minutes=2 + minutes * i / AT_SCHEDULES)
            self._schedule(f"at({at.strftime('%Y-%m-%dT%H:%M:%S')})", f"once-{i}")
        url = self.stack.live.url
        deadline = time.monotonic() + 4 * 3600
        for n in range(FOLLOWERS):
            thread = threading.Thread(
                target=self._follow_loop, args=(url, random.Random(n), deadline), daemon=True
            )
            thread.start()
            self._followers.append(thread)
        self.pauses.start()
        return self

    def _schedule(self, expression: str, name: str) -> None:
        job = page_job(self.site, f"sched-{name}", notify={"webhook": self.hook_url})
        job["priority"] = self.rng.choice(["high", "normal", "low"])
        spec = {"name": name, "expression": expression, "job": job}
        made = ScheduleMade(
            patient(partial(self.client.create_schedule, spec)).schedule_id, expression
        )
        self.schedules.append(made)
        self._arm(made)  # at once: moto renews a schedule's CreationDate when it is updated

    def _arm(self, schedule: ScheduleMade) -> None:
        """Wait until the schedule is mirrored in the Scheduler (the sweeper retries a
        mirror write that failed) and note when the Scheduler made it."""
        assert self.stack.provisioned is not None
        scheduler = RUNTIME.client("scheduler")  # this process injects no faults
        deadline = time.monotonic() + 300
        while schedule.armed is None and time.monotonic() < deadline:
            with contextlib.suppress(scheduler.exceptions.ResourceNotFoundException):
                mirrored = scheduler.get_schedule(
                    Name=mirror_name(schedule.schedule_id),
                    GroupName=self.stack.provisioned.schedule_group,
                )
                schedule.armed = mirrored["CreationDate"].astimezone(UTC)
                return
            time.sleep(1)

    def _follow_loop(self, url: str, rng: random.Random, deadline: float) -> None:
        client = self.stack.client()
        while (job_id := self._to_follow.get()) is not None:
            item = Followed(job_id)
            with self._lock:
                self.followed.append(item)
            try:
                follow_with_drops(client, url, item, rng, deadline)
            except Exception as exc:  # reported, not fatal to the run
                item.error = f"{type(exc).__name__}: {exc}"

    # --- the plain jobs' hooks ------------------------------------------------------------
    def dress(self, body: dict[str, Any]) -> dict[str, Any]:
        """A plain job's body with a priority and, one in ``WEBHOOK_EVERY``, the webhook."""
        self._n += 1
        roll = self.rng.random()
        priority = "high" if roll < PRIORITY_SHARES[0][1] else "normal"
        if roll > 1 - PRIORITY_SHARES[1][1]:
            priority = "low"
        body = {**body, "priority": priority}
        if self._n % WEBHOOK_EVERY == 0:
            body["notify"] = {"webhook": self.hook_url}
        return body

    def submitted(self, job_id: str, kind: str, body: dict[str, Any]) -> None:
        """After a plain job's submit: note it, follow it, maybe give it a child."""
        self.priority[job_id] = body.get("priority", "normal")
        if "notify" in body:
            self.webhook_jobs.add(job_id)
        if self._n % FOLLOW_EVERY == 0:
            self._to_follow.put(job_id)
        if kind == "page" and self._n % CHILD_EVERY == 0:
            child = page_job(
                self.site,
                f"child-of-{job_id}",
                depends_on=[job_id],
                notify={"webhook": self.hook_url},
            )
            key = f"child-{job_id}"
            child_id = patient(lambda: self.client.submit(child, idempotency_key=key).job_id)
            self.children[child_id] = job_id
            self.webhook_jobs.add(child_id)

    # --- the end --------------------------------------------------------------------------
    def stop_schedules(self) -> None:
        """Delete the schedules once the Scheduler has fired every time up to now (and end
        the embedded AWS's pauses)."""
        self.pauses.stop()
        self.cutoff = time.time() - 5
        poller = self.stack.sources.scheduler if self.stack.sources else None
        deadline = time.monotonic() + 180
        while poller is not None and time.monotonic() < deadline:
            fired = {(name, epoch(stamp)) for name, stamp in list(poller.fired)}
            due = self._due()
            if all((mirror_name(sid), t) in fired for sid, t in due):
                break
            time.sleep(1)
        for schedule in self.schedules:
            with contextlib.suppress(ApiError):
                patient(partial(self.client.delete_schedule, schedule.schedule_id))
        self.deleted_at = time.time()

    def _due(self) -> list[tuple[str, float]]:
        """Every (schedule id, scheduled time) the Scheduler owed between arming and the
        cutoff: the expression's times, a rate's counted from the schedule's creation."""
        out = []
        for schedule in self.schedules:
            if schedule.armed is None:
                continue  # never mirrored: reported as such
            armed = schedule.armed
            for when in parse(schedule.expression).fire_times(armed, anchor=armed):
                if when.timestamp() > self.cutoff:
                    break
                out.append((schedule.schedule_id, when.timestamp()))
        return out

    def job_ids(self) -> list[str]:
        made = [j for jobs in self.schedule_jobs.values() for j in jobs]
        return [*self.children, *made]

    def collect_schedule_jobs(self) -> None:
        for schedule in self.schedules:
            jobs = patient(partial(self._schedule_runs, schedule.schedule_id))
            self.schedule_jobs[schedule.schedule_id] = jobs
            self.webhook_jobs |= set(jobs)

    def _schedule_runs(self, schedule_id: str) -> list[str]:
        return [j.job_id for j in self.client.iter_jobs(schedule_id=schedule_id)]

    def settle(self, store: DynamoJobStore, timeout: float, say: Callable[[str], None]) -> Audit:
        """Wait (bounded) for this traffic's jobs, webhooks and followers; the audit."""
        self.collect_schedule_jobs()
        deadline = time.monotonic() + timeout
        while True:
            report = audit(store, self.job_ids())
            waiting = [j for j in report.lost if not self._waits_on_dead_letter(store, j)]
            hooks_due = self._hooks_missing(store)
            followers = sum(t.is_alive() for t in self._followers) - self._to_follow.qsize()
            if not waiting and not hooks_due and self._to_follow.empty() and not self._busy():
                return report
            if time.monotonic() > deadline:
                return report
            say(
                f"traffic: {len(waiting)} jobs, {len(hooks_due)} webhooks, "
                f"{self._to_follow.qsize()} + {max(0, followers)} followers to go"
            )
            time.sleep(5)

    def _busy(self) -> bool:
        with self._lock:
            return any(not f.done and f.error is None for f in self.followed)

    def _waits_on_dead_letter(self, store: DynamoJobStore, job_id: str) -> bool:
        """A child waiting for a dead-lettered parent waits by design (it may be redriven)."""
        parent = self.children.get(job_id)
        return parent is not None and store.get("dev", parent).status is JobStatus.DEAD_LETTERED

    def _hooks_missing(self, store: DynamoJobStore) -> list[str]:
        with self.hooks.lock:
            delivered = set(self.hooks.delivered)
        out = []
        for job_id in self.webhook_jobs - delivered:
            with contextlib.suppress(Exception):
                if store.get("dev", job_id).status.is_final:
                    out.append(job_id)
        return out

    def findings(self, store: DynamoJobStore, report: Audit) -> Findings:
        out = Findings(jobs=len(self.job_ids()), aws_pauses=self.pauses.count)
        out.lost = [j for j in report.lost if not self._waits_on_dead_letter(store, j)]
        out.children_waiting_on_dead_letters = len(report.lost) - len(out.lost)
        out.doubled = list(report.doubled)
        self._check_schedules(store, out)
        self._check_children(store, out)
        self._check_webhooks(store, out)
        self._check_live(out)
        waits: dict[str, list[float]] = defaultdict(list)
        for job_id, priority in self.priority.items():
            with contextlib.suppress(Exception):
                record = store.get("dev", job_id, consistent=False)
                if record.attempts:
                    start = epoch(record.attempts[0].started_at) or 0.0
                    waits[priority].append(start - (epoch(record.created_at) or start))
        out.waits_by_priority = dict(waits)
        return out

    def _check_schedules(self, store: DynamoJobStore, out: Findings) -> None:
        by_time: dict[tuple[str, float], int] = Counter()
        for schedule_id, jobs in self.schedule_jobs.items():
            for job_id in jobs:
                stamp = epoch(store.get("dev", job_id).scheduled_time)
                by_time[(schedule_id, stamp or 0.0)] += 1
        due = set(self._due())
        out.unmirrored_schedules = sum(s.armed is None for s in self.schedules)
        out.scheduled_times = sum(by_time.get(key, 0) == 1 for key in due)
        for key in sorted(due | set(by_time)):
            # A time past the cutoff and before the deletion was owed too: the schedule
            # still existed while the bench waited for the fires before the cutoff.
            owed = key in due or self.cutoff < key[1] <= self.deleted_at
            if by_time.get(key, 0) != 1 or not owed:
                when = datetime.fromtimestamp(key[1], UTC).isoformat()
                out.schedule_faults.append(f"{key[0]} {when}: {by_time.get(key, 0)} jobs")

    def _check_children(self, store: DynamoJobStore, out: Findings) -> None:
        for child_id, parent_id in self.children.items():
            child, parent = store.get("dev", child_id), store.get("dev", parent_id)
            starts = [epoch(a.started_at) or 0.0 for a in child.attempts]
            if not starts:
                continue
            done = epoch(parent.finished_at) if parent.status is JobStatus.SUCCEEDED else None
            if done is None or min(starts) < done:
                out.dependency_faults.append(
                    f"{child_id} started {child.attempts[0].started_at}, its parent "
                    f"{parent_id} {parent.status.value} at {parent.finished_at}"
                )

    def _check_webhooks(self, store: DynamoJobStore, out: Findings) -> None:
        with self.hooks.lock:
            delivered = set(self.hooks.delivered)
            ids = {j: set(v) for j, v in self.hooks.delivery_ids.items()}
        for job_id in sorted(self.webhook_jobs):
            record = store.get("dev", job_id)
            if not record.status.is_final:
                continue  # no job.finished for a job that has not finished
            if job_id in delivered:
                out.webhooks_delivered += 1
            else:
                out.webhooks_missing.append(job_id)
            if len(ids.get(job_id, ())) > 1:
                out.webhooks_many_ids.append(job_id)

    def _check_live(self, out: Findings) -> None:
        with self._lock:
            followed = list(self.followed)
        out.followed = len(followed)
        client = self.client
        for item in followed:
            out.reconnects += item.reconnects
            if not item.done:
                out.followers_unfinished += 1
                continue
            stored: list[int] = []
            after = 0
            while True:
                page = patient(partial(client.events, item.job_id, after=after, limit=1000))
                stored += [e.seq for e in page.events]
                after = page.next_after
                if not page.more:
                    break
            missed = set(stored) - set(item.seen)
            if missed or len(item.seen) != len(set(item.seen)):
                out.live_gaps += len(missed) + len(item.seen) - len(set(item.seen))
                out.live_gap_jobs.append(f"{item.job_id}: missed {sorted(missed)[:10]}")

    def stop(self) -> None:
        for _ in self._followers:
            self._to_follow.put(None)
        self.receiver.stop()
        self.client.close()


def print_findings(console: Console, found: Findings) -> None:
    table = Table(title="version one in flight")
    for column in ("figure", "value"):
        table.add_column(column)
    for name, value in rows(found):
        table.add_row(name, value)
    console.print(table)
    for line in details(found):
        console.print(line)


def rows(found: Findings) -> list[tuple[str, str]]:
    """The traffic's figures for the report's table."""

    def p50(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} s" if values else "-"

    waits = found.waits_by_priority
    return [
        (f"embedded AWS frozen for {AWS_PAUSE_S} s", f"{found.aws_pauses} times"),
        ("traffic jobs (children, schedule runs)", str(found.jobs)),
        ("  LOST / DOUBLED (must be 0)", f"{len(found.lost)} / {len(found.doubled)}"),
        (
            "scheduled times with one job / otherwise",
            f"{found.scheduled_times} / {len(found.schedule_faults)}",
        ),
        ("schedules never mirrored in the Scheduler", str(found.unmirrored_schedules)),
        ("children started before their parent succeeded", str(len(found.dependency_faults))),
        ("children waiting on a dead-lettered parent", str(found.children_waiting_on_dead_letters)),
        (
            "webhooks delivered / missing",
            f"{found.webhooks_delivered} / {len(found.webhooks_missing)}",
        ),
        ("  jobs whose job.finished had >1 delivery id", str(len(found.webhooks_many_ids))),
        (
            "followed live / reconnects / unfinished",
            f"{found.followed} / {found.reconnects} / {found.followers_unfinished}",
        ),
        ("live gaps (events stored, never seen)", str(found.live_gaps)),
        (
            "queue wait p50 high / normal / low",
            " / ".join(p50(waits.get(p, [])) for p in ("high", "normal", "low")),
        ),
    ]


def details(found: Findings) -> list[str]:
    lines = [f"  schedule: {f}" for f in found.schedule_faults[:20]]
    lines += [f"  dependency: {f}" for f in found.dependency_faults[:20]]
    lines += [f"  webhook missing: {j}" for j in found.webhooks_missing[:20]]
    lines += [f"  webhook ids: {j}" for j in found.webhooks_many_ids[:20]]
    lines += [f"  live gap: {g}" for g in found.live_gap_jobs[:20]]
    lines += [f"  traffic lost: {j}" for j in found.lost[:20]]
    return lines


def final_line(jobs: int, lost: int, doubled: int, found: Findings) -> str:
    return (
        f"chaos: {jobs} jobs, {lost} lost, {doubled} doubled; schedules "
        f"{found.scheduled_times} fired once each; webhooks {found.webhooks_delivered} "
        f"delivered, {len(found.webhooks_missing)} missing; live gaps {found.live_gaps}"
    )


def failed(found: Findings) -> bool:
    return bool(
        found.lost
        or found.doubled
        or found.schedule_faults
        or found.dependency_faults
        or found.unmirrored_schedules
        or found.webhooks_missing
        or found.webhooks_many_ids
        or found.live_gaps
    )
