"""The worker with real Chromium and the demo shop's order desk: a cancel or a drain while an
irreversible step acts lets it finish and records it; never a silent half-state."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.demo_site import DemoSite
from devstack.examples import EXAMPLES_DIR, load_example
from pagefleet.jobs.checkpoints import Checkpoint
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.service import cancel_job, resolve_job
from pagefleet.jobs.states import JobStatus
from tests.support.review import stop_in_review
from tests.worker.conftest import TENANT, submit, wait_for_job
from tests.worker.site_pages import ACCOUNT, LOGIN

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


def test_resolved_done_and_continue_runs_only_the_steps_after_the_click(shop, services, run_worker):
    body = order(shop, check=False)
    # What "continue" suits: the steps after the click start with their own goto.
    body["steps"][5:] = [
        {"action": "goto", "url": shop.url + "/shop/orders?reference={{job.id}}"},
        {"action": "extract", "name": "order_number", "selector": "#order-number"},
    ]
    job_id = submit(services, body).job_id
    stop_in_review(services.store, TENANT, job_id, step=4, label="Place order")
    placed, _, _ = shop.orders.place(job_id, "kettle", 2)  # the click took effect after all

    resolve_job(services, TENANT, job_id, "done", go_on=True, by="ops:test")
    run_worker()
    done = wait_for_job(services, job_id, timeout=90)

    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"order_number": placed.number}
    assert [(c.state, c.how) for c in done.checkpoints] == [("done", "resolved")]
    assert len(shop.orders.of(job_id)) == 1  # the click did not run again


def test_a_compensation_that_fails_puts_the_job_in_review(shop, services, run_worker):
    body = order(shop, check=True)
    # The confirmation never says "gift wrap": a permanent failure after the order...
    body["steps"].insert(5, {"action": "assert", "text_contains": "gift wrap", "timeout_ms": 500})
    # ... and the compensation cannot find the button it needs.
    body["compensate"][1] = {"action": "click", "selector": "#no-such-button", "timeout_ms": 500}
    job = submit(services, body)
    run_worker()
    ended = wait_for_job(services, job.job_id, {JobStatus.NEEDS_REVIEW}, timeout=90)

    assert ended.compensation is not None and ended.compensation.state == "failed"
    assert ended.compensation.error and "no-such-button" in ended.compensation.error
    [checkpoint] = ended.checkpoints
    assert (checkpoint.state, checkpoint.how) == ("done", "ran")
    [placed] = shop.orders.of(job.job_id)
    assert not placed.cancelled
    assert len(ended.attempts) == 1  # not retried: it waits for a person


def test_the_check_runs_as_the_user_the_workflow_logged_in_with(site, services, run_worker):
    """The check of a step after a use_session runs in the next attempt's fresh context with
    that session: the account page it reads shows the user only to them."""
    site.add("/plain", "<h1>Plain</h1>")
    site.add("/login", LOGIN.body.decode())
    site.add("/account", ACCOUNT.body.decode())
    run_worker()
    name = f"buyer-{uuid.uuid4().hex[:6]}"
    login = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": site.url("/login")},
                {"action": "fill", "selector": "#user", "value": "alice"},
                {"action": "fill", "selector": "#pw", "value": "hunter2-s3cret"},
                {"action": "click", "selector": "#login"},
                {"action": "wait_for", "url": "**/account"},
                {"action": "save_session", "name": name},
            ]
        },
    )
    assert wait_for_job(services, login.job_id).status is JobStatus.SUCCEEDED
    confirm = {
        "action": "click",
        "selector": "#who",
        "label": "Confirm",
        "irreversible": True,
        "check": [
            {"action": "goto", "url": site.url("/account")},
            {"action": "assert", "selector": "#who", "text_contains": "Welcome alice"},
        ],
    }
    job = submit(
        services,
        {
            "max_attempts": 2,
            "retry": {"base_seconds": 1, "cap_seconds": 1},
            "steps": [
                {"action": "goto", "url": site.url("/plain")},
                {"action": "use_session", "name": name},
                {"action": "goto", "url": site.url("/account")},
                confirm,
                # A timeout after the step: the next attempt checks before it goes on.
                {"action": "wait_for", "selector": "#never", "timeout_ms": 300},
            ],
        },
    )
    ended = wait_for_job(services, job.job_id, {JobStatus.NEEDS_REVIEW}, timeout=120)

    # Attempt 2's check saw alice's account: done, checked (not run again from the start).
    [checkpoint] = ended.checkpoints
    assert (checkpoint.state, checkpoint.how, checkpoint.attempt) == ("done", "checked", 2)
