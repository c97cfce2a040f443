"""await_human on the local stack in real Chromium against the demo site on 127.0.0.1: a job
parks in waiting_for_human with its tenant's running slot given back, is continued through
the API by its owner only, and finishes in the same browser with the page as it was left;
unanswered, its timeout ends it with human_timeout; a killed worker sends it to review."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devstack.chaos import chaos_worker_env, kill_worker, wait_until
from devstack.stack import LocalStack
from pagefleet.client import ApiError, Job, PagefleetClient
from pagefleet.jobs.models import TenantPolicy
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from tests.e2e.conftest import running

PROMPT = "Solve the CAPTCHA on the contact page, then continue"


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # Short leases: a killed worker's job is taken back within seconds.
    yield from running(
        LocalStack(api_port=0, workers=1, concurrency=2, worker_env=chaos_worker_env())
    )


@pytest.fixture(scope="module")
def owner(stack: LocalStack) -> Iterator[PagefleetClient]:
    key = stack.create_tenant_key("human-tenant")
    assert stack.provisioned is not None
    # One running slot: the second job runs only if the waiting one gave its slot back.
    RUNTIME.tenant_store(stack.provisioned.tenants_table).put_policy(
        "human-tenant", TenantPolicy(max_running=1)
    )
    with stack.client(key) as api:
        yield api


def _parking_job(stack: LocalStack, timeout_s: int) -> dict[str, Any]:
    site = stack.site_url
    return {
        "name": "await-human",
        "steps": [
            {"action": "goto", "url": f"{site}/contact.html"},
            {"action": "fill", "selector": "#name", "value": "Grace Hopper"},
            {"action": "await_human", "prompt": PROMPT, "timeout_s": timeout_s},
            # No goto after it: only the same page still has what was typed before the wait.
            {"action": "extract", "name": "typed", "selector": "#name", "kind": "value"},
        ],
        "max_attempts": 1,
    }


def _waiting(api: PagefleetClient, job_id: str) -> Job:
    def parked() -> Job | None:
        job = api.get(job_id)
        assert not job.is_final, job.error
        return job if job.status is JobStatus.WAITING_FOR_HUMAN else None

    found: Job = wait_until(parked, 180, poll=0.5, what="waiting_for_human")
    return found


def test_a_waiting_job_gives_back_its_slot_and_goes_on_in_the_same_browser_when_continued(
    stack: LocalStack, owner: PagefleetClient
) -> None:
    job = owner.submit(_parking_job(stack, timeout_s=600))
    waiting = _waiting(owner, job.job_id)
    assert waiting.human is not None and waiting.human.prompt == PROMPT
    assert waiting.human.step_index == 2 and waiting.human.continued_at is None

    # Its slot is free: another job of the tenant (max_running 1) runs to its end meanwhile.
    other = owner.submit(
        {
            "steps": [
                {"action": "goto", "url": f"{stack.site_url}/about.html"},
                {"action": "extract", "name": "title", "selector": "h1"},
            ]
        }
    )
    done = owner.wait(other.job_id, timeout=180)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert owner.get(job.job_id).status is JobStatus.WAITING_FOR_HUMAN

    # Another tenant can neither see it nor answer it.
    with stack.client(stack.create_tenant_key("human-other")) as stranger:
        for call in (lambda: stranger.get(job.job_id), lambda: stranger.continue_job(job.job_id)):
            with pytest.raises(ApiError) as refused:
                call()
            assert refused.value.status == 404
    assert owner.get(job.job_id).human.continued_at is None  # type: ignore[union-attr]

    answered = owner.continue_job(job.job_id, note="solved it")
    assert answered.human is not None and answered.human.note == "solved it"
    finished = owner.wait(job.job_id, timeout=180)
    assert finished.status is JobStatus.SUCCEEDED, finished.error
    assert finished.result == {"typed": "Grace Hopper"}  # the page as it was before the wait
    assert finished.attempt == 1
    states = [e.status for e in owner.events(job.job_id).events if e.type == "state"]
    assert states[:3] == ["running", "waiting_for_human", "running"], states
    with pytest.raises(ApiError) as again:  # it no longer waits
        owner.continue_job(job.job_id)
    assert again.value.status == 409 and "succeeded" in str(again.value)


def test_an_unanswered_wait_ends_the_job_with_human_timeout(
    stack: LocalStack, owner: PagefleetClient
) -> None:
    job = owner.submit(_parking_job(stack, timeout_s=3))
    ended = owner.wait(job.job_id, timeout=180)
    assert ended.status is JobStatus.FAILED
    assert ended.error is not None and ended.error.kind == "human_timeout", ended.error
    assert ended.error.step_index == 2 and PROMPT in ended.error.message


def test_a_killed_worker_sends_the_waiting_job_to_review_never_to_a_blind_retry(
    stack: LocalStack, owner: PagefleetClient
) -> None:
    job = owner.submit({**_parking_job(stack, timeout_s=600), "max_attempts": 3})
    _waiting(owner, job.job_id)
    holder = next(p for p in stack.worker_processes if p.alive())
    kill_worker(holder)
    stack.start_worker()

    def reviewed() -> Job | None:
        now = owner.get(job.job_id)
        assert now.status in (JobStatus.WAITING_FOR_HUMAN, JobStatus.NEEDS_REVIEW), now.status
        return now if now.status is JobStatus.NEEDS_REVIEW else None

    found: Job = wait_until(reviewed, 180, poll=0.5, what="needs_review")
    assert found.attempt == 1  # never run again on its own
    assert found.error is not None and "waited for a person" in found.error.message
