"""Cancellation, deadlines and the circuit breaker, end to end with real Chromium."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from browser_task.observe.task_protection import TaskProtection
from devstack.chaos import wait_until
from devstack.ecs_agent import EcsAgent
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.service import cancel_job
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.targets.breakers import BreakerPolicy, BreakerState, origin_of
from tests.worker.conftest import TENANT, submit, wait_for_empty_queue, wait_for_job

pytestmark = pytest.mark.e2e

SLOW_STEP = {"action": "wait_for", "selector": "#never", "timeout_ms": 120_000}


def test_running_job_is_cancelled_mid_action_and_keeps_its_artifacts(
    site, services, make_settings, run_worker
):
    url = site.add("/cancel-me", "<h1>before</h1>")
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": url},
                {"action": "screenshot", "name": "before.png"},
                SLOW_STEP,  # would wait two minutes
            ],
            "options": {"job_timeout_s": 600},
        },
    )
    settings = make_settings()
    agent = EcsAgent()  # the task's ECS agent: protection from scale-in while a job runs
    run_worker(settings, protection=TaskProtection(agent.start()))
    wait_for_job(services, job.job_id, {JobStatus.RUNNING})
    # Cancel once the slow step has begun (its run event says so): the screenshot before it
    # has landed then, however long it took on a loaded machine.
    events = DynamoEventStore(RUNTIME.client("dynamodb"), settings.jobs_table)

    def slow_step_started() -> bool:
        page, _ = events.page(TENANT, job.job_id, after=0, limit=100, now=int(time.time()))
        return any(e["type"] == "step_started" and e.get("index") == 2 for e in page)

    wait_until(slow_step_started, 60, what="the slow step's step_started event")
    assert agent.protected()
    asked = cancel_job(services, TENANT, job.job_id)
    assert asked.status is JobStatus.RUNNING and asked.cancel_requested_at

    # Bounded wait far below the step's two minutes: the worker stops it mid-action.
    done = wait_for_job(services, job.job_id, timeout=20)
    assert done.status is JobStatus.CANCELLED
    assert done.error is not None and done.error.kind == "cancelled"
    assert done.error.step_index == 2
    assert "before.png" in {a.name for a in done.artifacts}
    wait_for_empty_queue(settings.queue_url("standard"))
    wait_until(lambda: not agent.protected(), 20, what="protection given back when idle")
    assert agent.refused == []
    agent.stop()


def test_queued_job_cancelled_before_a_worker_sees_it_never_runs(
    site, services, settings, run_worker
):
    url = site.add("/never-visited", "<h1>x</h1>")
    job = submit(services, {"steps": [{"action": "goto", "url": url}]})
    assert cancel_job(services, TENANT, job.job_id).status is JobStatus.CANCELLED
    run_worker(settings)
    wait_for_empty_queue(settings.queue_url("standard"))
    assert site.hits.get("/never-visited", 0) == 0
    assert services.store.get(TENANT, job.job_id).status is JobStatus.CANCELLED


def test_job_not_started_by_its_deadline_expires_unrun(site, services, settings, run_worker):
    url = site.add("/too-late", "<h1>x</h1>")
    # Room for a slow submit: the deadline is compared with the next whole second.
    deadline = utcnow() + timedelta(seconds=4)
    job = submit(services, {"steps": [{"action": "goto", "url": url}], "deadline": iso(deadline)})
    time.sleep(max(0.0, (deadline - utcnow()).total_seconds()) + 1.2)
    run_worker(settings)
    done = wait_for_job(services, job.job_id, timeout=30)
    assert done.status is JobStatus.EXPIRED
    assert done.error is not None and done.error.timeout == "deadline"
    assert site.hits.get("/too-late", 0) == 0
    wait_for_empty_queue(settings.queue_url("standard"))


def test_failing_site_opens_the_circuit_defers_jobs_then_recovers(
    site, services, make_settings, run_worker
):
    down = site.add("/flaky", "<h1>down</h1>", status=503)
    # The cooldown outlasts the wait for the deferral below (20 s) whatever the load: a
    # shorter one (12 s) let the half-open probe run a waiting job against the site still
    # down (503: retry_scheduled) before it was read deferred (a CI run, 2026-12-07).
    policy = BreakerPolicy(window_s=60, min_requests=2, failure_rate=0.5, cooldown_s=30)
    settings = make_settings(breaker=policy, concurrency=1)
    one_try = {"steps": [{"action": "goto", "url": down}], "max_attempts": 1}
    failing = [submit(services, one_try) for _ in range(2)]
    worker = run_worker(settings)
    for job in failing:
        assert wait_for_job(services, job.job_id, timeout=30).status is JobStatus.FAILED

    breakers = worker.worker._breaker._breakers
    origin = origin_of(down)
    assert origin is not None
    deadline = time.monotonic() + 10  # outcomes are written once a second
    # One tenant's failures open its own breaker on the site's origin (not the shared one).
    while breakers.get(origin, TENANT).state is not BreakerState.OPEN:
        assert time.monotonic() < deadline, "the circuit did not open"
        time.sleep(0.1)

    # While the circuit is open, new jobs wait queued with a reason; none runs yet.
    waiting = [submit(services, {"steps": [{"action": "goto", "url": down}]}) for _ in range(3)]
    deadline = time.monotonic() + 20
    while not (deferred := services.store.get(TENANT, waiting[0].job_id)).deferred_reason:
        assert time.monotonic() < deadline, "the job was not deferred"
        time.sleep(0.05)
    assert deferred.status is JobStatus.QUEUED
    assert f"circuit open for {origin}" in (deferred.deferred_reason or "")

    # The site comes back: after the cooldown one probe passes, the circuit closes, and
    # every deferred job runs once, without having spent an attempt on the outage.
    site.add("/flaky", "<h1>up</h1>", status=200)
    for job in waiting:
        # A job looked at while the probe is out waits one more cooldown: up to two in all
        # (a CI run, 2026-12-07: the first one waited on, deferred twice, was still queued
        # 60 s after the site came back).
        done = wait_for_job(services, job.job_id, timeout=2 * policy.cooldown_s + 30)
        assert done.status is JobStatus.SUCCEEDED
        assert done.attempt == 1
    assert breakers.get(origin, TENANT).state is BreakerState.CLOSED


def test_reclaiming_a_dead_workers_last_attempt_fails_the_job(site, services, settings, run_worker):
    url = site.add("/last-try", "<h1>x</h1>")
    job = submit(services, {"steps": [{"action": "goto", "url": url}], "max_attempts": 1})
    now = int(time.time())
    # Attempt 1 was taken by a worker that died: its lease ran out.
    services.store.claim(
        TENANT, job.job_id, owner="dead/1", lease_until=now - 5, now=now, started_at=iso(utcnow())
    )
    # Its message is still queued (the claim was written, the delete never happened): this
    # worker's lease watch or that message, whichever comes first, finds the lease run out.
    run_worker(settings)
    done = wait_for_job(services, job.job_id, timeout=30)
    assert done.status is JobStatus.FAILED
    assert done.error is not None and done.error.kind == "lease_expired"
    assert done.error.timeout == "lease"
    assert site.hits.get("/last-try", 0) == 0
    wait_for_empty_queue(settings.queue_url("standard"))
