"""The worker on the ports' in-memory fakes, each request delayed as AWS would delay it.

``bench/e2e_throughput.py --fakes --aws-latency-ms N`` measures the worker itself: no
embedded AWS and no function stand-ins share its cores, only the worker (its Python, driver
and Chromium, in this process and under it) and the demo site. Every call the worker makes
to a port (job store, queue, artifacts, run events, breakers, tenant counters) waits ``N``
ms first, in the calling thread, as a request to AWS from the same region waits for its
answer; the fakes (devstack/fakes) keep the conditions the AWS adapters keep (the contract
suite holds both to one suite). A receive on an empty queue waits, as SQS's long poll does,
until a message is sent or its wait is over.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, cast

from browser_task.__main__ import build_worker
from browser_task.egress.breakers import BreakerGate
from browser_task.slot.worker import Worker
from browser_task.tenant.access import SharedTenantData
from devstack.fakes import (
    FakeArtifactStore,
    FakeJobStore,
    FakeQueue,
    FakeSecrets,
    FakeTenantStore,
)
from devstack.fakes.breakers import FakeBreakers
from devstack.fakes.live import FakeEventStore
from devstack.fakes.schedules import FakeScheduleStore
from devstack.fakes.session_commands import FakeCommandLedger
from devstack.fakes.session_inbox import FakeInboxRegistry, FakeSessionInbox
from devstack.fakes.tenancy import FakeAuditLog, FakeTenantCounters, FakeUsageStore
from pagefleet.adapters.dynamodb import CursorCodec
from pagefleet.jobs.models import JobRequest, epoch_of_iso
from pagefleet.jobs.ports import SYSTEM_CLOCK, JobQueue, ReceivedMessage
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import FINAL_STATES, JobStatus
from pagefleet.jobs.submit_policy import SubmitPolicy
from pagefleet.specs.settings import WorkerSettings
from pagefleet.specs.tenant_defaults import LimitDefaults
from pagefleet.tenancy.gate import TenantGate
from pagefleet.tenancy.limits import LimitsCache

TENANT = "bench"
POOL = "standard"
# How often the bench looks whether the oldest job it waits for is final.
WAIT_LOOK_S = 0.2


class Delayed:
    """``inner`` with every public method call ``latency_s`` late (counted per method)."""

    def __init__(self, inner: Any, latency_s: float, counts: dict[str, int]) -> None:
        self._inner = inner
        self._latency_s = latency_s
        self._counts = counts
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name.startswith("_") or not callable(value):
            return value
        label = f"{type(self._inner).__name__}.{name}"

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self._counts[label] = self._counts.get(label, 0) + 1
            if self._latency_s > 0:
                time.sleep(self._latency_s)
            return value(*args, **kwargs)

        return call


class LongPollQueue:
    """A fake queue whose ``receive`` waits for a message up to its ``wait_seconds``, as
    SQS's long poll does (the fake answers at once: a worker would spin on it)."""

    def __init__(self, inner: FakeQueue, delayed: Any) -> None:
        self._inner = inner
        self._delayed = delayed
        self._sent = threading.Condition()
        # Cleared while the bench fills the queue: a receive then finds it empty (a long
        # poll waits for the opening), so the run starts with every job queued.
        self.open = threading.Event()
        self.open.set()

    def opened(self) -> None:
        """Let receives see the queue again, and wake the long polls waiting on it."""
        self.open.set()
        with self._sent:
            self._sent.notify_all()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._delayed, name)

    def send(self, *args: Any, **kwargs: Any) -> str:
        message_id = str(self._delayed.send(*args, **kwargs))
        with self._sent:
            self._sent.notify_all()
        return message_id

    def receive(
        self, pool: str, *, max_messages: int, wait_seconds: int, visibility: int
    ) -> list[ReceivedMessage]:
        deadline = time.monotonic() + wait_seconds
        if not self.open.wait(wait_seconds):
            return []
        got: list[ReceivedMessage] = self._delayed.receive(
            pool, max_messages=max_messages, wait_seconds=0, visibility=visibility
        )
        while not got and time.monotonic() < deadline:
            with self._sent:
                # A delayed message becomes visible without a send: look again now and then.
                self._sent.wait(min(0.05, max(0.0, deadline - time.monotonic())))
            got = self._inner.receive(
                pool, max_messages=max_messages, wait_seconds=0, visibility=visibility
            )
        return got


class FakesWorker:
    """One worker on delayed fakes, run on a thread of this process, and how to feed it."""

    def __init__(self, *, latency_ms: float, concurrency: int) -> None:
        latency_s = latency_ms / 1000
        self.counts: dict[str, int] = {}

        def delayed(inner: Any) -> Any:
            return Delayed(inner, latency_s, self.counts)

        self._store = FakeJobStore()
        queue = FakeQueue(SYSTEM_CLOCK)
        # Every tenant's policy is the stage's default; a cap no bench reaches.
        limits = LimitsCache(FakeTenantStore(), LimitDefaults(max_running=200), ttl_s=60)
        gate = TenantGate(delayed(FakeTenantCounters()), limits, delayed(self._store))
        self._queue = LongPollQueue(queue, delayed(queue))
        self.services = JobServices.of(
            delayed(self._store),
            cast(JobQueue, self._queue),
            delayed(FakeArtifactStore()),
            CursorCodec(),
            hooks=gate,
            # The demo site is on 127.0.0.1.
            policy=SubmitPolicy(allow_loopback=True),
        )
        settings = WorkerSettings(
            jobs_table="-",
            tenants_table="-",
            artifacts_bucket="-",
            queue_urls={POOL: "-"},
            concurrency=concurrency,
            allow_loopback=True,
            poll_wait_seconds=10,
        )
        tenant_data = SharedTenantData(
            self.services.artifacts, FakeSecrets(), None, delayed(FakeUsageStore())
        )
        self.worker: Worker = build_worker(
            settings,
            services=self.services,
            worker_id="bench-fakes",
            policies=limits,
            tenant_data=tenant_data,
            breakers=BreakerGate(delayed(FakeBreakers()), "bench-fakes"),
            events=delayed(FakeEventStore()),
            schedules=FakeScheduleStore(),
            session_inbox=FakeSessionInbox(),
            inbox_registry=FakeInboxRegistry(),
            session_commands=FakeCommandLedger(),
            audit=FakeAuditLog(),
        )
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="fakes-worker", daemon=True)

    def _main(self) -> None:
        try:
            asyncio.run(self.worker.run())
        except BaseException as exc:
            self._error = exc
            self.worker.ready.set()

    def __enter__(self) -> FakesWorker:
        self._thread.start()
        if not self.worker.ready.wait(120) or self._error is not None:
            raise RuntimeError(f"the worker on the fakes did not start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.request_stop()
        self._thread.join(120)

    def run(self, request: dict[str, Any], jobs: int, timeout_s: float) -> tuple[int, float]:
        """Queue ``jobs`` copies of ``request``, then let the worker see them and wait until
        all are final: (succeeded, seconds from that moment to the last job's
        ``finished_at``). The submissions are the API's work (a function on AWS, not the
        worker's cores): made before the run, with the queue closed to the worker."""
        body = JobRequest.model_validate(request)
        self._queue.open.clear()
        try:
            ids = [submit_job(self.services, TENANT, body).job.job_id for _ in range(jobs)]
        finally:
            start, began = time.time(), time.perf_counter()
            self._queue.opened()
        records = self._wait(ids, began + timeout_s)
        ends = [epoch_of_iso(r.finished_at) for r in records if r.finished_at]
        done = len(records) == jobs and len(ends) == jobs
        elapsed = max(ends) - start if done else time.perf_counter() - began
        return sum(r.status is JobStatus.SUCCEEDED for r in records), elapsed

    def _wait(self, ids: list[str], deadline: float) -> list[JobRecord]:
        """Each job's record once final (those final by the deadline), read in submission
        order, one read a look. The run is timed by the records' ``finished_at``, so the
        looks can be far apart: each is a deep copy of a record on the worker's cores (and
        under its store's lock), which the bare loop's side never pays. Reading every pending
        job every 10 ms cost the worker's side ~4 % of its jobs a second at 100 jobs."""
        # The fake itself, not the delayed one: the bench's reads cost the worker no delay.
        final: list[JobRecord] = []
        while len(final) < len(ids) and time.perf_counter() < deadline:
            record = self._store.get(TENANT, ids[len(final)])
            if record.status in FINAL_STATES:
                final.append(record)
            else:
                time.sleep(WAIT_LOOK_S)
        if self._error is not None:
            raise RuntimeError(f"the worker on the fakes stopped: {self._error!r}")
        return final

    def per_job(self, jobs: int) -> dict[str, float]:
        """Port calls a job so far (every call the worker and the submissions made)."""
        return {name: count / jobs for name, count in sorted(self.counts.items())}
