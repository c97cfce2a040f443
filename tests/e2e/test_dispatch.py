"""Dispatch on the local stack with real Chromium: schedules, delays, priority, dependencies,
named workflow versions. One worker with one slot, so the order jobs start in is visible."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from devstack.stack import LocalStack
from pagefleet.client import Job, PagefleetClient
from pagefleet.jobs.states import JobStatus
from tests.e2e.conftest import running

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    yield from running(LocalStack(api_port=0, workers=1, concurrency=1))


def page_job(site: str, **extra: object) -> dict[str, object]:
    return {
        "steps": [
            {"action": "goto", "url": f"{site}/"},
            {"action": "extract", "name": "title", "selector": "h1"},
        ],
        "max_attempts": 1,
        **extra,
    }


def epoch(stamp: str | None) -> float:
    assert stamp is not None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_a_delayed_job_reads_scheduled_then_starts_after_its_delay(
    client: PagefleetClient, stack: LocalStack
) -> None:
    job = client.submit(page_job(stack.site_url, delay_seconds=5))
    assert job.status is JobStatus.SCHEDULED
    done = client.wait(job.job_id, timeout=120)
    assert done.status is JobStatus.SUCCEEDED, done.error
    waited = epoch(done.started_at) - epoch(done.created_at)
    # SQS holds the message its DelaySeconds; the system's own timestamps say when it ran.
    assert waited >= 5 - 0.5, waited


def test_high_priority_jobs_start_before_normal_ones_queued_earlier(
    client: PagefleetClient, stack: LocalStack
) -> None:
    site = stack.site_url
    busy = client.submit(
        {"steps": [{"action": "goto", "url": f"{site}/"}, {"action": "sleep", "ms": 4000}]}
    )
    deadline = time.monotonic() + 60
    while client.get(busy.job_id).status is not JobStatus.RUNNING:
        assert time.monotonic() < deadline, "the busy job never started"
        time.sleep(0.2)
    normal = [client.submit(page_job(site, name=f"normal-{n}")) for n in range(2)]
    high = [client.submit(page_job(site, name=f"high-{n}", priority="high")) for n in range(2)]
    jobs = [client.wait(j.job_id, timeout=180) for j in [busy, *normal, *high]]
    assert all(j.status is JobStatus.SUCCEEDED for j in jobs), [j.error for j in jobs]
    starts = {j.name: epoch(j.started_at) for j in jobs[1:]}
    assert max(starts["high-0"], starts["high-1"]) < min(starts["normal-0"], starts["normal-1"])


def test_a_chain_runs_in_order_and_reads_its_parents_results(
    client: PagefleetClient, stack: LocalStack
) -> None:
    site = stack.site_url
    # A's sleep keeps it running while B and C are submitted: a parent that finished first
    # would make B start at once, and the test would race the worker instead of checking order.
    a = client.submit(
        {
            "name": "a",
            "max_attempts": 1,
            "steps": [
                {"action": "goto", "url": f"{site}/"},
                {"action": "extract", "name": "title", "selector": "h1"},
                {"action": "sleep", "ms": 3000},
            ],
        }
    )
    b = client.submit(page_job(site, name="b", depends_on=[a.job_id]))
    c = client.submit(
        {
            "name": "c",
            "depends_on": [b.job_id],
            "steps": [
                {"action": "goto", "url": f"{site}/?from={{{{parents.{b.job_id}.result.title}}}}"},
                {"action": "extract", "name": "seen", "selector": "h1"},
            ],
        }
    )
    assert b.status is JobStatus.WAITING and c.status is JobStatus.WAITING
    done = [client.wait(j.job_id, timeout=180) for j in (a, b, c)]
    assert [j.status for j in done] == [JobStatus.SUCCEEDED] * 3, [j.error for j in done]
    assert epoch(done[0].finished_at) <= epoch(done[1].started_at)
    assert epoch(done[1].finished_at) <= epoch(done[2].started_at)
    # C's goto carried B's result in its URL: the page rendered the same title.
    assert done[2].result == {"seen": done[1].result["title"]}  # type: ignore[index]


def test_a_failed_parent_cancels_its_child_naming_it(
    client: PagefleetClient, stack: LocalStack
) -> None:
    parent = client.submit(
        {
            "max_attempts": 1,
            "steps": [
                {"action": "goto", "url": f"{stack.site_url}/"},
                {"action": "assert", "selector": "#nowhere", "visible": True, "timeout_ms": 500},
            ],
        }
    )
    child = client.submit(page_job(stack.site_url, depends_on=[parent.job_id]))
    assert client.wait(parent.job_id, timeout=120).status is JobStatus.FAILED
    cancelled = _final(client, child.job_id)
    assert cancelled.status is JobStatus.CANCELLED and cancelled.error is not None
    assert parent.job_id in cancelled.error.message and "failed" in cancelled.error.message


def test_a_job_of_name_at_1_runs_version_1_after_version_2_exists(
    client: PagefleetClient, stack: LocalStack
) -> None:
    site = stack.site_url
    one = client.put_workflow(
        "titles",
        {
            "steps": [
                {"action": "goto", "url": "{{inputs.site}}/"},
                {"action": "extract", "name": "v1_title", "selector": "h1"},
            ],
            "inputs": {"site": "http://127.0.0.1:9"},
        },
    )
    two = client.put_workflow(
        "titles",
        {
            "steps": [
                {"action": "goto", "url": f"{site}/"},
                {"action": "extract", "name": "v2", "selector": "h1"},
            ]
        },
    )
    assert (one.version, two.version) == (1, 2)
    job = client.submit({"workflow": "titles@1", "inputs": {"site": site}})
    done = client.wait(job.job_id, timeout=120)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert (done.workflow, done.workflow_version) == ("titles", 1)
    assert set(done.result or {}) == {"v1_title"}
    assert client.workflow("titles").versions == [1, 2]


def test_an_at_schedule_fires_once_a_paused_one_never(
    client: PagefleetClient, stack: LocalStack
) -> None:
    poller = stack.sources.scheduler if stack.sources else None
    assert poller is not None
    at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    spec = {
        "name": "once",
        "expression": f"at({at.strftime('%Y-%m-%dT%H:%M:%S')})",
        "timezone": "UTC",
        "job": page_job(stack.site_url),
    }
    once = client.create_schedule(spec)
    paused = client.create_schedule({**spec, "name": "paused", "enabled": False})
    assert once.next_fire_times == [at.strftime("%Y-%m-%dT%H:%M:%SZ")]
    assert paused.next_fire_times == []
    # The local Scheduler, driven with the time we choose instead of waiting an hour.
    poller.tick(at + timedelta(seconds=1))
    poller.tick(at + timedelta(seconds=2))  # the same fire is never delivered twice
    runs = client.schedule_runs(once.schedule_id).jobs
    assert len(runs) == 1 and runs[0].scheduled_time == at.strftime("%Y-%m-%dT%H:%M:%SZ")
    done = client.wait(runs[0].job_id, timeout=120)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.schedule_id == once.schedule_id
    assert client.schedule_runs(paused.schedule_id).jobs == []
    # A duplicate invocation of the same fire (the Scheduler retried) makes no second job.
    stack.functions["scheduler"].invoke(
        {
            "tenant_id": "dev",
            "schedule_id": once.schedule_id,
            "scheduled_time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )
    assert len(client.schedule_runs(once.schedule_id).jobs) == 1


def _final(client: PagefleetClient, job_id: str, timeout: float = 60) -> Job:
    return client.wait(job_id, timeout=timeout)
