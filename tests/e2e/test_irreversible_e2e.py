"""Irreversible steps on the local stack with real Chromium and the demo shop's order desk:
an order placed once whatever happens between the click and its answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devstack.demo_orders import Orders
from devstack.examples import EXAMPLES_DIR, load_example
from devstack.stack import LocalStack
from pagefleet.client import ApiError, PagefleetClient
from pagefleet.jobs.states import JobStatus
from tests.e2e.test_gateway_routes import _cli

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PLACE_ORDER = EXAMPLES_DIR / "place-order.json"
SETTLE_S = 180


@pytest.fixture
def orders(stack: LocalStack) -> Iterator[Orders]:
    assert stack.site is not None
    stack.site.orders.reset()
    yield stack.site.orders
    stack.site.orders.reset()


def order_job(stack: LocalStack, *, check: bool = True, **extra: Any) -> dict[str, Any]:
    body = load_example(PLACE_ORDER, stack.site_url)
    if not check:
        del body["steps"][4]["check"]
    return {**body, **extra}


def events_of(client: PagefleetClient, job_id: str) -> list[Any]:
    return client.events(job_id, limit=1000).events


def test_the_example_places_one_order_and_lists_its_checkpoint(
    stack: LocalStack, client: PagefleetClient, orders: Orders
) -> None:
    job = client.wait(client.submit(order_job(stack)).job_id, timeout=SETTLE_S)

    assert job.status is JobStatus.SUCCEEDED, job.error
    [order] = orders.of(job.job_id)  # the reference is {{job.id}}
    assert job.result == {"order_number": order.number}
    [checkpoint] = job.checkpoints
    assert (checkpoint.step, checkpoint.label) == (4, "Place order")
    assert (checkpoint.state, checkpoint.how, checkpoint.attempt) == ("done", "ran", 1)
    states = [e.state for e in events_of(client, job.job_id) if e.type.value == "checkpoint"]
    assert states == ["started", "done"]


def test_a_timeout_between_the_click_and_the_answer_is_checked_not_ordered_twice(
    stack: LocalStack, client: PagefleetClient, orders: Orders
) -> None:
    # The desk records the order, then answers long after the job's watchdog.
    orders.set(slow_s=20)
    job = client.wait(
        client.submit(order_job(stack, options={"job_timeout_s": 5})).job_id, timeout=SETTLE_S
    )

    assert job.status is JobStatus.SUCCEEDED, job.error
    [order] = orders.of(job.job_id)
    assert job.result == {"order_number": order.number}
    assert [a.status for a in job.attempts] == [JobStatus.RETRY_SCHEDULED, JobStatus.SUCCEEDED]
    assert job.attempts[0].error is not None and job.attempts[0].error.timeout == "job"
    [checkpoint] = job.checkpoints
    assert (checkpoint.state, checkpoint.how, checkpoint.attempt) == ("done", "checked", 2)
    checks = [
        e for e in events_of(client, job.job_id) if (e.path or "").startswith("steps[4].check")
    ]
    assert checks and all(e.attempt == 2 for e in checks)


def test_without_a_check_it_waits_in_review_and_resolved_done_it_succeeds(
    stack: LocalStack, client: PagefleetClient, orders: Orders
) -> None:
    orders.set(slow_s=20)
    submitted = client.submit(order_job(stack, check=False, options={"job_timeout_s": 5}))
    job = client.wait(submitted.job_id, timeout=SETTLE_S)

    assert job.status is JobStatus.NEEDS_REVIEW, job.error
    assert job.error is not None and job.error.kind == "needs_review"
    assert job.error.step_index == 4 and "no check" in job.error.message
    # The click still waiting for the shop's answer (unknown), or returned without it (done).
    assert [c.state for c in job.checkpoints] in (["unknown"], ["done"])
    assert len(job.attempts) == 1  # never retried automatically
    assert len(orders.of(job.job_id)) == 1
    assert {a.name for a in client.artifacts(job.job_id)} >= {"failure.png", "failure.html"}

    resolved = _cli("resolve", job.job_id, "--done", key=stack.dev_api_key or "", stack=stack)
    assert resolved.returncode == 0, resolved.stderr
    done = client.get(job.job_id)
    assert done.status is JobStatus.SUCCEEDED and done.error is None
    assert done.resolution is not None and done.resolution.skipped == [5, 6, 7]
    assert done.resolution.by.startswith("dev:")
    assert (done.checkpoints[0].state, done.checkpoints[0].how) == ("done", "resolved")
    assert len(orders.of(job.job_id)) == 1  # still one order


def test_resolved_not_done_it_runs_again_and_a_second_resolve_is_409(
    stack: LocalStack, client: PagefleetClient, orders: Orders
) -> None:
    orders.set(drop=True)  # recorded, never answered
    job = client.wait(client.submit(order_job(stack, check=False)).job_id, timeout=SETTLE_S)
    assert job.status is JobStatus.NEEDS_REVIEW, job.error
    assert len(orders.of(job.job_id)) == 1  # never sent again by the browser either
    # A person looks, and (say) cancels the order by hand: not done. It runs again.
    for order in orders.of(job.job_id):
        orders.cancel(order.number)
    orders.set(drop=False)
    resolved = _cli("resolve", job.job_id, "--not-done", key=stack.dev_api_key or "", stack=stack)
    assert resolved.returncode == 0, resolved.stderr
    with pytest.raises(ApiError) as again:
        client.resolve(job.job_id, "done")
    # 409 naming the state the job is in by then (a worker may already have claimed it).
    assert again.value.status == 409
    assert any(f"is {state};" in str(again.value) for state in ("queued", "running", "succeeded"))

    rerun = client.wait(job.job_id, timeout=SETTLE_S)
    assert rerun.status is JobStatus.SUCCEEDED, rerun.error
    placed = [o for o in orders.of(job.job_id) if not o.cancelled]
    assert len(placed) == 1 and rerun.result == {"order_number": placed[0].number}


def test_a_failure_after_the_order_runs_the_compensation_once(
    stack: LocalStack, client: PagefleetClient, orders: Orders
) -> None:
    body = order_job(stack)
    # The shop's confirmation never says "gift wrap": a permanent failure after the order.
    body["steps"].insert(5, {"action": "assert", "text_contains": "gift wrap", "timeout_ms": 500})
    job = client.wait(client.submit(body).job_id, timeout=SETTLE_S)

    assert job.status is JobStatus.FAILED, job.error
    assert job.error is not None and job.error.kind == "assertion_failed"
    assert job.compensation is not None and job.compensation.state == "done"
    [order] = orders.of(job.job_id)
    assert order.cancelled
    kinds = [e.state for e in events_of(client, job.job_id) if e.type.value == "compensation"]
    assert kinds == ["started", "done"]


def test_needs_review_is_a_filter_a_count_and_not_a_running_slot(
    stack: LocalStack, client: PagefleetClient, orders: Orders
) -> None:
    orders.set(drop=True)
    job = client.wait(client.submit(order_job(stack, check=False)).job_id, timeout=SETTLE_S)
    assert job.status is JobStatus.NEEDS_REVIEW
    assert len(orders.of(job.job_id)) == 1
    listed = client.list(status=JobStatus.NEEDS_REVIEW)
    assert job.job_id in {j.job_id for j in listed.jobs}
    assert client.stats().counts["needs_review"] >= 1
    assert client.tenant().usage.running == 0
    client.cancel(job.job_id)
    assert client.get(job.job_id).status is JobStatus.CANCELLED
