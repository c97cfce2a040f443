"""Submissions under the tenant's limits: the rate (token bucket) and the queued cap.

``submit`` and ``submit_batch`` are what the API calls instead of ``jobs.service.submit_job``:
tokens first (429 with ``Retry-After`` and ``RateLimit-*``), then room in the queued count
(429 naming ``max_queued``), then the job. A single submission asks for its token and its
room in one conditional write (``TenantCounters.spend_and_hold``); a batch spends its tokens,
then holds its room. A replay of an Idempotency-Key takes a token (it is a request) but no
queued room.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pagefleet.errors import EnqueueFailed, PagefleetError, QueueFull, RateLimited
from pagefleet.jobs import service
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.ports import SYSTEM_CLOCK, Clock
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.replay import offline_request
from pagefleet.jobs.service import JobServices, Submitted
from pagefleet.jobs.submission import JobSubmission
from pagefleet.tenancy.bucket import Bucket, Spend, answer
from pagefleet.tenancy.limits import BACKLOG_JOB_S, TenantLimits
from pagefleet.tenancy.ports import CounterView, TenantCounters, UnstartedJobs

# A new job of a tenant with a deep backlog is first visible within this (SQS's longest delay).
MAX_START_SPREAD_S = 900
# A refused submission recounts the queued jobs at most this often per tenant.
RECOUNT_EVERY_S = 30
MAX_BATCH = 100
BATCH_THREADS = 8


@dataclass(frozen=True)
class Quotas:
    """The API's side of the tenant limits."""

    counters: TenantCounters
    limits: Callable[[str], TenantLimits]
    unstarted: UnstartedJobs
    clock: Clock = SYSTEM_CLOCK

    def now_ms(self) -> int:
        return int(self.clock.now() * 1000)

    def bucket(self, tenant_id: str) -> Bucket:
        limits = self.limits(tenant_id)
        return Bucket(per_minute=limits.submits_per_minute, burst=limits.burst)

    def spend(self, tenant_id: str, jobs: int = 1) -> Spend:
        """Take ``jobs`` tokens, or raise RateLimited with the headers to send."""
        return self._admitted(tenant_id, self.try_spend(tenant_id, jobs))

    def spend_and_hold(self, tenant_id: str) -> tuple[Spend, int | None]:
        """One job's token and its queued room in one write: the spend, and the queued count
        after holding the room (None: no room was free, the token alone is spent; the job
        then asks ``hold_queued``, which recounts before it refuses). Raises RateLimited."""
        bucket = self.bucket(tenant_id)
        now = self.now_ms()
        result = self.counters.spend_and_hold(
            tenant_id,
            cost_ms=bucket.cost_ms(1),
            tolerance_ms=bucket.tolerance_ms,
            now_ms=now,
            limit=self.limits(tenant_id).max_queued,
        )
        spent = result.spent
        rate = answer(bucket, allowed=spent.allowed, tat_ms=spent.tat_ms, now_ms=now, cost=1)
        return self._admitted(tenant_id, rate), result.queued

    def _admitted(self, tenant_id: str, spent: Spend) -> Spend:
        if not spent.allowed:
            bucket = self.bucket(tenant_id)
            raise RateLimited(
                f"tenant {tenant_id} is over its submission rate ({bucket.per_minute} jobs a "
                f"minute, bursts of {bucket.burst}); retry in {spent.retry_after_s} s",
                headers=spent.headers(),
                limit="submits_per_minute",
                retry_after_s=spent.retry_after_s,
            )
        return spent

    def try_spend(self, tenant_id: str, jobs: int) -> Spend:
        bucket = self.bucket(tenant_id)
        now = self.now_ms()
        result = self.counters.spend(
            tenant_id,
            jobs=jobs,
            cost_ms=bucket.cost_ms(jobs),
            tolerance_ms=bucket.tolerance_ms,
            now_ms=now,
        )
        return answer(bucket, allowed=result.allowed, tat_ms=result.tat_ms, now_ms=now, cost=jobs)

    def hold_queued(self, tenant_id: str, jobs: int = 1) -> int:
        """Room for ``jobs`` more queued jobs (the count after), or QueueFull naming the limit."""
        limit = self.limits(tenant_id).max_queued
        held = self.counters.add_queued(tenant_id, jobs, limit=limit)
        if held is not None:
            return held
        # A crash may have left the count high: recount (rarely) before saying no.
        recount = self.counters.recount_queued(
            tenant_id,
            lambda: self.unstarted.count_unstarted(tenant_id),
            now=int(self.clock.now()),
            every_s=RECOUNT_EVERY_S,
        )
        if recount is not None:
            held = self.counters.add_queued(tenant_id, jobs, limit=limit)
            if held is not None:
                return held
        raise QueueFull(
            f"tenant {tenant_id} has {limit} jobs waiting to start, its limit (max_queued); "
            "submit again when some have started",
            headers={"Retry-After": str(RECOUNT_EVERY_S)},
            limit="max_queued",
            max_queued=limit,
        )

    def start_delay(self, tenant_id: str, queued: int) -> int:
        """When a new job's message should first be visible: at once, unless the tenant
        already has more jobs waiting than twice its running slots. Then its job could not
        start for about ``queued / max_running`` job lengths anyway, and its messages are
        spread over that time: a flood does not sit in the queue ahead of other tenants'
        jobs (SQS fair queues do this on AWS too; the spread also spares the deferrals)."""
        slots = self.limits(tenant_id).max_running
        if queued <= 2 * slots:
            return 0
        return int(random.random() * min(MAX_START_SPREAD_S, queued / slots * BACKLOG_JOB_S))

    def count_queued(self, tenant_id: str, jobs: int = 1) -> None:
        """Count jobs that were not held to the cap (a schedule's): they are taken off the
        count when they start like any other."""
        self.counters.add_queued(tenant_id, jobs, limit=2**31)

    def release_queued(self, tenant_id: str, jobs: int = 1) -> None:
        if jobs > 0:
            self.counters.sub_queued(tenant_id, jobs)

    def view(self, tenant_id: str) -> CounterView:
        return self.counters.view(tenant_id, now_ms=self.now_ms())


@dataclass(frozen=True)
class Admitted:
    submitted: Submitted
    rate: Spend


def submit(
    svc: JobServices,
    quotas: Quotas,
    tenant_id: str,
    request: JobSubmission | JobRequest,
    *,
    idempotency_key: str | None = None,
    correlation_id: str | None = None,
    schedule: tuple[str, str] | None = None,
    alongside: Callable[[JobRecord], object] | None = None,
) -> Admitted:
    """``schedule``: (schedule id, scheduled time) of a schedule's run started by hand;
    ``alongside``: work run while a new job is queued (``jobs.service.submit_job``)."""
    key = idempotency_key
    if (
        key is not None
        and svc.store.get_idempotency(tenant_id, key, now=svc.clock.now()) is not None
    ):
        rate = quotas.spend(tenant_id)  # a replay: a token (it is a request), no queued room
        return Admitted(_replay(svc, tenant_id, request, key, correlation_id, schedule), rate)
    rate, held = quotas.spend_and_hold(tenant_id)
    submitted = _submit_one(
        svc,
        quotas,
        tenant_id,
        request,
        key,
        correlation_id,
        held=held,
        schedule=schedule,
        key_is_new=True,
        alongside=alongside,
    )
    return Admitted(submitted, rate)


def replay(
    svc: JobServices,
    quotas: Quotas,
    tenant_id: str,
    job_id: str,
    *,
    correlation_id: str | None = None,
) -> Admitted:
    """An offline replay of ``job_id`` (pagefleet.jobs.replay), submitted as any job is
    (the tenant's rate and queued room), then linked from the job it replays."""
    request = offline_request(service.get_job(svc, tenant_id, job_id))
    admitted = submit(svc, quotas, tenant_id, request, correlation_id=correlation_id)
    svc.store.note_replay(tenant_id, job_id, admitted.submitted.job.job_id)
    return admitted


def _submit_one(
    svc: JobServices,
    quotas: Quotas,
    tenant_id: str,
    request: JobSubmission | JobRequest,
    key: str | None,
    correlation_id: str | None,
    *,
    held: int | None = None,
    schedule: tuple[str, str] | None = None,
    key_is_new: bool = False,
    alongside: Callable[[JobRecord], object] | None = None,
) -> Submitted:
    """One job whose token is spent; ``held``: the queued count once room was held for it
    (None: not held yet); ``key_is_new``: its key was just looked up and not found."""
    if (
        not key_is_new
        and key is not None
        and svc.store.get_idempotency(tenant_id, key, now=svc.clock.now())
    ):
        if held is not None:
            quotas.release_queued(tenant_id)
        return _replay(svc, tenant_id, request, key, correlation_id, schedule)
    queued = quotas.hold_queued(tenant_id) if held is None else held
    try:
        submitted = service.submit_job(
            svc,
            tenant_id,
            request,
            idempotency_key=key,
            correlation_id=correlation_id,
            schedule=schedule,
            delay_s=quotas.start_delay(tenant_id, queued),
            alongside=alongside,
        )
    except EnqueueFailed:
        raise  # recorded, and queued by the sweeper: it holds its room
    except BaseException:
        quotas.release_queued(tenant_id)
        raise
    if not submitted.created:  # a concurrent request with the same key made it
        quotas.release_queued(tenant_id)
    return submitted


def _replay(
    svc: JobServices,
    tenant_id: str,
    request: JobSubmission | JobRequest,
    key: str,
    correlation_id: str | None,
    schedule: tuple[str, str] | None,
) -> Submitted:
    """The job an Idempotency-Key already made (or a 409 for another request)."""
    return service.submit_job(
        svc,
        tenant_id,
        request,
        idempotency_key=key,
        correlation_id=correlation_id,
        schedule=schedule,
    )


# --- batches ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchItem:
    request: JobSubmission | JobRequest
    idempotency_key: str | None = None


@dataclass(frozen=True)
class ItemResult:
    index: int
    status: int  # as the item alone would have been answered: 202, 409, 429...
    submitted: Submitted | None = None
    error: PagefleetError | None = None


@dataclass(frozen=True)
class BatchResult:
    items: list[ItemResult]
    rate: Spend


def submit_batch(
    svc: JobServices,
    quotas: Quotas,
    tenant_id: str,
    items: Sequence[BatchItem],
    *,
    correlation_id: str | None = None,
    status_of: Callable[[PagefleetError], int],
) -> BatchResult:
    """Submit up to ``MAX_BATCH`` jobs; each takes a token and queued room like a single
    submission. Items past the tokens or the room left are answered 429 each, in order."""
    rate = quotas.try_spend(tenant_id, len(items))
    admitted = len(items)
    if not rate.allowed:
        admitted = min(rate.remaining, len(items))
        rate = quotas.try_spend(tenant_id, admitted) if admitted else rate
        if not rate.allowed:
            admitted = 0
    waves = _waves(items)
    # Room is held at once for the admitted first uses of their keys; a key used again is a
    # replay (no room) or a 409, and an item past the room held asks for its own (QueueFull,
    # or room a recount found) once its key is known to be new.
    firsts = [index for index in waves[0] if index < admitted]
    held, queued = _hold_room(quotas, tenant_id, len(firsts))
    with_room = set(firsts[:held])

    def one(index: int, item: BatchItem) -> ItemResult:
        try:
            if index >= admitted:
                raise _rate_limited(quotas, tenant_id, rate)
            count = queued if index in with_room else None
            correlation = f"{correlation_id[:120]}-{index}" if correlation_id else None
            submitted = _submit_one(
                svc, quotas, tenant_id, item.request, item.idempotency_key, correlation, held=count
            )
            return ItemResult(index, 202, submitted=submitted)
        except PagefleetError as exc:
            return ItemResult(index, status_of(exc), error=exc)

    # Items are independent (each its own record, key and message): submitted side by side,
    # answered in order. A key given again is settled after the items before it (a replay of
    # the first, or a 409), as requests sent one after the other would be; items without room
    # held wait for those with room to be recorded (a recount they cause must see them).
    without_room = [index for index in waves[0] if index not in with_room]
    results: dict[int, ItemResult] = {}
    with ThreadPoolExecutor(max_workers=BATCH_THREADS) as pool:
        for wave in [firsts[:held], without_room, *waves[1:]]:
            results.update(zip(wave, pool.map(one, wave, [items[i] for i in wave]), strict=True))
    return BatchResult([results[i] for i in range(len(items))], rate)


def _waves(items: Sequence[BatchItem]) -> list[list[int]]:
    """The items' indexes in waves: the n-th use of an Idempotency-Key in wave n."""
    uses: dict[str, int] = {}
    waves: list[list[int]] = [[]]
    for index, item in enumerate(items):
        key = item.idempotency_key
        wave = uses.get(key, 0) if key is not None else 0
        if key is not None:
            uses[key] = wave + 1
        while len(waves) <= wave:
            waves.append([])
        waves[wave].append(index)
    return waves


def _hold_room(quotas: Quotas, tenant_id: str, wanted: int) -> tuple[int, int]:
    """Hold queued room for as many of ``wanted`` jobs as fit (one or two writes): how many,
    and the queued count after."""
    if wanted <= 0:
        return 0, 0
    limit = quotas.limits(tenant_id).max_queued
    count = quotas.counters.add_queued(tenant_id, wanted, limit=limit)
    if count is not None:
        return wanted, count
    room = min(wanted, max(0, limit - quotas.view(tenant_id).queued))
    count = quotas.counters.add_queued(tenant_id, room, limit=limit) if room else None
    return (room, count) if count is not None else (0, 0)


def _rate_limited(quotas: Quotas, tenant_id: str, rate: Spend) -> RateLimited:
    bucket = quotas.bucket(tenant_id)
    retry = max(rate.retry_after_s, 1)
    headers = {**rate.headers(), "Retry-After": str(retry)}
    return RateLimited(
        f"over the submission rate ({bucket.per_minute} jobs a minute, bursts of "
        f"{bucket.burst}); retry in {retry} s",
        headers=headers,
        limit="submits_per_minute",
        retry_after_s=retry,
    )
