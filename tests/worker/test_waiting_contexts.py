"""A worker's contexts waiting for a person, bounded (moto server, real Chromium, one slot).

A job parked by ``await_human`` lets its slot go while the worker holds fewer than
``max_waiting_contexts`` such contexts: the next job runs in that slot meanwhile. Past the
cap, a waiting job keeps its slot (its run events say why) and no job is failed for it.
Continued, each goes on in its own page at its next step."""

from __future__ import annotations

import time
from typing import Any

import pytest

from devstack.chaos import wait_until
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.jobs.service import continue_job
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from tests.worker.conftest import TENANT, submit, wait_for_job

pytestmark = pytest.mark.e2e

WAITING = {JobStatus.WAITING_FOR_HUMAN}


def _asking(url: str, value: str) -> dict[str, Any]:
    return {
        "steps": [
            {"action": "goto", "url": url},
            {"action": "fill", "selector": "#code", "value": value},
            {"action": "await_human", "prompt": "check the code", "timeout_s": 600},
            {"action": "extract", "name": "code", "selector": "#code", "kind": "value"},
        ],
        "max_attempts": 1,
    }


def test_a_waiting_job_lets_its_slot_go_up_to_the_cap_then_keeps_it(
    site, services, make_settings, run_worker
) -> None:
    url = site.add("/code", '<h1>Code</h1><input id="code">')
    settings = make_settings(concurrency=1, max_waiting_contexts=1)
    run_worker(settings)
    first = submit(services, _asking(url, "first"))
    wait_for_job(services, first.job_id, WAITING)

    # One slot, and the first job waits in its context: the next job runs meanwhile.
    read = {"action": "extract", "name": "h", "selector": "h1"}
    plain = submit(services, {"steps": [{"action": "goto", "url": url}, read]})
    assert wait_for_job(services, plain.job_id).status is JobStatus.SUCCEEDED

    # The cap (1) is held: the second waiting job keeps the slot, and says so.
    second = submit(services, _asking(url, "second"))
    wait_for_job(services, second.job_id, WAITING)

    def said(job_id: str) -> bool:
        events, _ = store.page(TENANT, job_id, after=0, limit=500, now=int(time.time()))
        return any("waits in its slot" in (e.get("message") or "") for e in events)

    store = DynamoEventStore(RUNTIME.client("dynamodb"), settings.jobs_table)
    wait_until(lambda: said(second.job_id), 60, what="the second job saying it keeps its slot")
    assert not said(first.job_id)

    for job, value in ((second, "second"), (first, "first")):
        continue_job(services, TENANT, job.job_id, note=None)
        done = wait_for_job(services, job.job_id)
        assert done.status is JobStatus.SUCCEEDED, done.error
        assert done.result == {"code": value} and done.attempt == 1  # its own page, kept
