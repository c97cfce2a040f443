"""Which notifications a job's change makes, and where each goes.

A job's ``notify.on`` lists what its webhook is sent for (``pagefleet.jobs.models``,
``NotifyTopic``); a job without ``notify`` uses the tenant's default webhook for
``finished`` only, today's behaviour. Each notification has its event name (the webhook's
``event`` and ``Pagefleet-Event``):

| topic | event | when |
| --- | --- | --- |
| finished | job.finished | every final state |
| finished, needs_review | job.needs_review | a job waits for a person (needs_review) |
| finished, waiting_for_human | job.waiting_for_human | an await_human step parked the job |
| changed | job.changed | a succeeded run whose ``changes`` say changed |
| failed | job.failed | a failed run (failed, timed_out, expired, dead_lettered) |
| failed | schedule.alerting | a schedule with ``alert`` turned alerting (instead of job.failed) |
| recovered | schedule.recovered | that schedule's next successful run |

A job in needs_review is settled for its client as a final state is, so ``finished`` gets
it too. One event goes out once whichever of its topics asked for it (its delivery id is
the event's).

A scheduled run's failure is its schedule's to report (``pagefleet.schedules.watch``): each
failed run when the schedule has no ``alert``, once when it turns alerting when it has.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.request_parts import DEFAULT_TOPICS, NotifyTopic
from pagefleet.jobs.states import JobStatus
from pagefleet.live.events import ended
from pagefleet.notify.ports import NotifyDefaults
from pagefleet.schedules.health import FAILED_RUNS

FINISHED = "job.finished"
CHANGED = "job.changed"
FAILED = "job.failed"
NEEDS_REVIEW = "job.needs_review"
WAITING_FOR_HUMAN = "job.waiting_for_human"
ALERTING = "schedule.alerting"
RECOVERED = "schedule.recovered"
# How long the stream reader keeps a tenant's default webhook: a changed default applies to
# the jobs that end this long after the change, the same bound as the tenant's limits
# (``pagefleet.tenancy.limits.LimitsCache``), without a tenants-table read per job.
DEFAULTS_TTL_S = 10.0


def job_events(change: JobChange) -> list[tuple[NotifyTopic, str]]:
    """What a job's own change is notified as: (topic, event) pairs (a schedule's turns are
    the schedule's)."""
    job = change.new
    if job is None or not change.status_changed:
        return []
    if job.status is JobStatus.NEEDS_REVIEW:
        return [("finished", NEEDS_REVIEW), ("needs_review", NEEDS_REVIEW)]
    if job.status is JobStatus.WAITING_FOR_HUMAN:
        # As needs_review: the person the finished webhook tells is the one asked.
        return [("finished", WAITING_FOR_HUMAN), ("waiting_for_human", WAITING_FOR_HUMAN)]
    if not ended(job.status):
        return []
    events: list[tuple[NotifyTopic, str]] = [("finished", FINISHED)]
    if job.status is JobStatus.SUCCEEDED and job.changes is not None and job.changes.changed:
        events.append(("changed", CHANGED))
    if job.status in FAILED_RUNS and job.schedule_id is None:
        events.append(("failed", FAILED))
    return events


def webhook_for(job: JobRecord, topic: NotifyTopic, defaults: NotifyDefaults) -> str | None:
    """The URL ``topic`` is sent to for ``job``, or None: not wanted, or no webhook."""
    notify = job.request.notify
    if topic not in (notify.on if notify is not None else DEFAULT_TOPICS):
        return None
    if notify is not None and notify.own_webhook:
        return notify.webhook
    return defaults.get(job.tenant_id)


class CachedDefaults:
    """``NotifyDefaults`` read through, each tenant's kept ``ttl_s`` (its absence too: most
    tenants have no default, and their every finished job would read it)."""

    def __init__(
        self,
        defaults: NotifyDefaults,
        *,
        ttl_s: float = DEFAULTS_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._defaults = defaults
        self._ttl = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[float, str | None]] = {}

    def get(self, tenant_id: str) -> str | None:
        now = self._clock()
        with self._lock:
            hit = self._cached.get(tenant_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        webhook = self._defaults.get(tenant_id)
        with self._lock:
            if len(self._cached) > 10_000:
                self._cached.clear()
            self._cached[tenant_id] = (now + self._ttl, webhook)
        return webhook

    def put(self, tenant_id: str, webhook: str | None) -> None:
        self._defaults.put(tenant_id, webhook)
        with self._lock:
            self._cached.pop(tenant_id, None)
