"""A worker whose lease was taken over can no longer write (store-level fencing)."""

from __future__ import annotations

import time

import pytest

from pagefleet.errors import IllegalTransition, LeaseLost
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.record import AttemptRecord
from pagefleet.jobs.states import JobStatus
from tests.worker.conftest import TENANT, submit


def test_a_worker_that_lost_its_lease_cannot_overwrite_the_new_attempt(services):
    store = services.store
    job = submit(services, {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})
    now = int(time.time())
    started = iso(utcnow())

    first = store.claim(
        TENANT, job.job_id, owner="worker-a", lease_until=now - 1, now=now, started_at=started
    )
    assert first.attempt == 1
    # worker-a stalls; its lease has expired, so worker-b takes the job over.
    second = store.claim(
        TENANT, job.job_id, owner="worker-b", lease_until=now + 60, now=now, started_at=started
    )
    assert (second.attempt, second.lease_owner) == (2, "worker-b")

    with pytest.raises(LeaseLost):
        store.extend_lease(TENANT, job.job_id, attempt=1, owner="worker-a", lease_until=now + 60)
    with pytest.raises(LeaseLost):
        store.finish(
            TENANT,
            job.job_id,
            attempt=1,
            owner="worker-a",
            status=JobStatus.SUCCEEDED,
            at=iso(utcnow()),
            result={"stale": True},
            artifacts=[],
            error=None,
            history=AttemptRecord(attempt=1, worker="worker-a", started_at=started),
        )
    # A third worker cannot claim while worker-b's lease is live.
    with pytest.raises(IllegalTransition):
        store.claim(
            TENANT, job.job_id, owner="worker-c", lease_until=now + 60, now=now, started_at=started
        )

    current = store.get(TENANT, job.job_id)
    assert current.status is JobStatus.RUNNING
    assert (current.attempt, current.lease_owner) == (2, "worker-b")
    assert current.result is None
    assert current.attempts == []
