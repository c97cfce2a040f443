"""The worker with real Chromium and the demo shop's order desk: a cancel or a drain while an
irreversible step acts lets it finish and records it; never a silent half-state."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.demo_site import DemoSite
from devstack.examples import EXAMPLES_DIR, load_example
from pagefleet.jobs.checkpoints import Checkpoint
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.service import cancel_job
from pagefleet.jobs.states import JobStatus
from tests.worker.conftest import TENANT, submit, wait_for_job

pytestmark = pytest.mark.e2e


@pytest.fixture
def shop() -> Iterator[DemoSite]:
    site = DemoSite().start()
    yield site
    site.stop()


def order(shop: DemoSite, *, check: bool) -> dict[str, Any]:
    body = load_example(EXAMPLES_DIR / "place-order.json", shop.url)
    if not check:
        del body["steps"][4]["check"]
    return body


def wait_for_order(shop: DemoSite, reference: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not shop.orders.of(reference):
        assert time.monotonic() < deadline, "the order never reached the shop"
        time.sleep(0.05)


def test_a_cancel_during_the_click_lets_it_finish_and_records_it_done(shop, services, run_worker):
    shop.orders.set(slow_s=4)  # the click waits for the shop's answer
    job = submit(services, order(shop, check=False))
    run_worker()
    wait_for_order(shop, job.job_id)
    assert cancel_job(services, TENANT, job.job_id).status is JobStatus.RUNNING

    ended = wait_for_job(services, job.job_id, timeout=90)
    assert ended.status is JobStatus.CANCELLED
    [checkpoint] = ended.checkpoints
    assert (checkpoint.state, checkpoint.how) == ("done", "ran")
    assert len(shop.orders.of(job.job_id)) == 1


def test_a_drain_during_the_click_records_it_and_leaves_it_to_the_check(
    shop, services, make_settings, run_worker
):
    shop.orders.set(slow_s=3)
    job = submit(services, order(shop, check=True))
    running = run_worker(make_settings(drain_seconds=0))
    wait_for_order(shop, job.job_id)
    running.stop()  # the drain gives up on the job at once, the click still under way

    handed_back = services.store.get(TENANT, job.job_id)
    assert handed_back.status is JobStatus.RETRY_SCHEDULED
    assert [c.state for c in handed_back.checkpoints] == ["done"]
    # The next worker checks the order, finds it and goes on: one order.
    shop.orders.set(slow_s=0)
    run_worker()
    done = wait_for_job(services, job.job_id, timeout=90)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert (done.checkpoints[0].state, done.checkpoints[0].how) == ("done", "checked")
    assert len(shop.orders.of(job.job_id)) == 1


def test_a_check_that_finds_no_order_runs_the_workflow_from_the_start(shop, services, run_worker):
    job = submit(services, order(shop, check=True))
    # An earlier attempt wrote "started" and its worker vanished before the shop heard of it.
    now = int(time.time())
    gone = services.store.claim(
        TENANT, job.job_id, owner="gone/1", lease_until=now - 1, now=now, started_at=iso(utcnow())
    )
    started = Checkpoint(step=4, label="Place order", state="started", attempt=1, at=iso(utcnow()))
    services.lifecycle.record_progress(gone, [started])

    run_worker()  # its message comes back: the reclaim checks first
    done = wait_for_job(services, job.job_id, timeout=90)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert [(c.state, c.how, c.attempt) for c in done.checkpoints] == [("done", "ran", 2)]
    assert len(shop.orders.of(job.job_id)) == 1
