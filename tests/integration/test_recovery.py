"""Cancellation, dead letters, redrive, deadlines and the sweeper, against a real moto server."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from devstack.pollers import scheduled_event
from devstack.provision import Provisioned
from pagefleet.errors import DeadlinePassed
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.record import AttemptRecord, JobError
from pagefleet.jobs.rules import LEASE_GRACE_S, LEASES_LOST_LIMIT
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.sweeper import RETRY_GRACE_S, sweep
from pagefleet.runtime import RUNTIME
from pagefleet.specs import metrics_names
from pagefleet.tenancy.api_keys import create_api_key
from tests.integration.test_api import SIMPLE, queued_messages
from tests.integration.test_telemetry import emf_blobs
from tests.support.api import ApiCaller
from tests.support.sqs_events import sqs_event


@pytest.fixture
def tenant(api_env: Provisioned) -> ApiCaller:
    return ApiCaller(create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "acme")[0])


@pytest.fixture
def admin(api_env: Provisioned) -> ApiCaller:
    return ApiCaller(
        create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "ops", admin=True)[0]
    )


def svc() -> Any:
    from functions.api import app as api_app

    return api_app.services()


def now() -> int:
    return int(utcnow().timestamp())


def claim(job_id: str, owner: str = "w1", lease_s: int = 60, tenant: str = "acme") -> Any:
    t = now()
    return svc().store.claim(
        tenant, job_id, owner=owner, lease_until=t + lease_s, now=t, started_at=iso(utcnow())
    )


# --- cancellation -----------------------------------------------------------------------------
def test_cancel_queued_job_is_immediate_and_it_never_runs(tenant: ApiCaller) -> None:
    job_id = tenant.post_job(SIMPLE).body["job_id"]
    resp = tenant.call("POST", f"/v1/jobs/{job_id}/cancel")
    assert resp.status == 200
    assert resp.body["status"] == "cancelled"
    with pytest.raises(Exception, match="cancelled"):
        claim(job_id)


def test_cancel_running_job_flags_it_for_its_worker(tenant: ApiCaller) -> None:
    job_id = tenant.post_job(SIMPLE).body["job_id"]
    claim(job_id)
    resp = tenant.call("POST", f"/v1/jobs/{job_id}/cancel")
    assert resp.status == 202
    assert resp.body["status"] == "running"
    assert resp.body["cancel_requested_at"]
    # The worker's heartbeat reads the flag from the record it extends.
    beat = svc().store.extend_lease("acme", job_id, attempt=1, owner="w1", lease_until=now() + 60)
    assert beat.cancel_requested_at is not None


def test_cancel_finished_job_is_409(tenant: ApiCaller) -> None:
    job_id = tenant.post_job(SIMPLE).body["job_id"]
    tenant.call("POST", f"/v1/jobs/{job_id}/cancel")
    resp = tenant.call("POST", f"/v1/jobs/{job_id}/cancel")
    assert resp.status == 409
    assert "cancelled" in resp.error["message"]


def test_cancel_other_tenants_job_is_404(tenant: ApiCaller, admin: ApiCaller) -> None:
    job_id = tenant.post_job(SIMPLE).body["job_id"]
    assert admin.call("POST", f"/v1/jobs/{job_id}/cancel").status == 404
    assert tenant.get_job(job_id).body["status"] == "queued"


# --- dead letters -----------------------------------------------------------------------------
def _dlq_message(job: dict[str, Any]) -> str:
    return json.dumps(
        {
            "tenant_id": "acme",
            "job_id": job["job_id"],
            "attempt": 0,
            "correlation_id": job["job"]["correlation_id"],
            "pool": "standard",
        }
    )


def test_dead_letters_handler_marks_jobs_and_reports_partial_failures(
    tenant: ApiCaller, api_env: Provisioned
) -> None:
    from functions.dead_letters import handler as dl

    RUNTIME.reset()
    first = tenant.post_job(SIMPLE).body
    done = tenant.post_job(SIMPLE).body
    tenant.call("POST", f"/v1/jobs/{done['job_id']}/cancel")
    event = sqs_event([_dlq_message(first), _dlq_message(done), "{poison"], receive_count=5)
    response = dl.handler(event, None)
    assert response == {"batchItemFailures": []}  # every record handled; nothing retried
    job = tenant.get_job(first["job_id"]).body
    assert job["status"] == "dead_lettered"
    assert "received 5 times" in job["error"]["message"]
    assert tenant.get_job(done["job_id"]).body["status"] == "cancelled"  # final stays final


def test_dead_letters_handler_retries_a_record_when_the_store_fails(
    tenant: ApiCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    from functions.dead_letters import handler as dl

    RUNTIME.reset()
    first = tenant.post_job(SIMPLE).body
    event = sqs_event([_dlq_message(first), "not a job message"])

    def broken(*a: Any, **k: Any) -> None:
        raise ConnectionError("dynamodb unreachable")

    monkeypatch.setattr(dl.services().store, "transition", broken)
    response = dl.handler(event, None)
    # Only the record that failed goes back to the DLQ for another try.
    assert response["batchItemFailures"] == [{"itemIdentifier": event["Records"][0]["messageId"]}]


def test_admin_lists_and_redrives_dead_letters(
    tenant: ApiCaller, admin: ApiCaller, api_env: Provisioned
) -> None:
    from functions.dead_letters import handler as dl

    RUNTIME.reset()
    job = tenant.post_job(SIMPLE).body
    queued_messages(api_env)  # drain the original message
    dl.handler(sqs_event([_dlq_message(job)]), None)

    assert tenant.call("GET", "/v1/admin/dead-letters").status == 403
    listed = admin.call("GET", "/v1/admin/dead-letters")
    assert listed.status == 200
    assert [d["job_id"] for d in listed.body["dead_letters"]] == [job["job_id"]]

    assert tenant.call("POST", "/v1/admin/dead-letters/redrive", {}).status == 403
    resp = admin.call("POST", "/v1/admin/dead-letters/redrive", {"jobs": [f"acme/{job['job_id']}"]})
    assert resp.status == 200
    assert resp.body["redriven"] == [job["job_id"]]
    assert tenant.get_job(job["job_id"]).body["status"] == "queued"
    assert len(queued_messages(api_env)) == 1
    assert admin.call("GET", "/v1/admin/dead-letters").body["dead_letters"] == []
    # A redriven job gets its full retry budget back.
    record = svc().store.get("acme", job["job_id"])
    assert record.attempts_used == 0


def test_a_dead_letter_past_its_retention_is_neither_listed_nor_redriven(
    tenant: ApiCaller, admin: ApiCaller, api_env: Provisioned
) -> None:
    """Gone, though TTL has not deleted it (days late on AWS, never here): its artifacts may
    be gone already, and TTL would delete the record under a new run."""
    import time

    from functions.dead_letters import handler as dl

    RUNTIME.reset()
    old, kept = tenant.post_job(SIMPLE).body, tenant.post_job(SIMPLE).body
    queued_messages(api_env)  # drain the original messages
    dl.handler(sqs_event([_dlq_message(old), _dlq_message(kept)]), None)
    RUNTIME.client("dynamodb").update_item(  # the expiry the retention consumer wrote, passed
        TableName=api_env.jobs_table,
        Key={"pk": {"S": "TENANT#acme"}, "sk": {"S": f"JOB#{old['job_id']}"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )
    listed = admin.call("GET", "/v1/admin/dead-letters").body["dead_letters"]
    assert [d["job_id"] for d in listed] == [kept["job_id"]]
    named = admin.call(
        "POST", "/v1/admin/dead-letters/redrive", {"jobs": [f"acme/{old['job_id']}"]}
    )
    assert named.status == 200 and named.body["redriven"] == []
    every = admin.call("POST", "/v1/admin/dead-letters/redrive", {})  # all those listed
    assert every.status == 200 and every.body["redriven"] == [kept["job_id"]]
    assert svc().store.get("acme", old["job_id"]).status is JobStatus.DEAD_LETTERED
    assert len(queued_messages(api_env)) == 1


def test_redrive_request_is_validated(admin: ApiCaller) -> None:
    resp = admin.call("POST", "/v1/admin/dead-letters/redrive", {"jobs": ["no-slash"]})
    assert resp.status == 400
    assert resp.error["field"] == "jobs[0]"


# --- deadlines --------------------------------------------------------------------------------
def test_deadline_in_the_past_is_refused_at_submit(tenant: ApiCaller) -> None:
    past = iso(utcnow() - timedelta(minutes=1))
    resp = tenant.post_job({**SIMPLE, "deadline": past})
    assert resp.status == 400
    assert resp.error["field"] == "deadline"


def test_job_past_its_deadline_cannot_start_and_the_sweeper_expires_it(
    tenant: ApiCaller, api_env: Provisioned
) -> None:
    # Seconds of room: the deadline is sent to the second and compared with the next whole
    # second of the API's clock, so a slow submit must not make it "in the past" already.
    deadline = utcnow() + timedelta(seconds=5)
    job_id = tenant.post_job({**SIMPLE, "deadline": iso(deadline)}).body["job_id"]
    later = int(deadline.timestamp()) + 5
    with pytest.raises(DeadlinePassed):
        svc().store.claim(
            "acme", job_id, owner="w", lease_until=later + 60, now=later, started_at=iso(utcnow())
        )
    import time

    time.sleep(max(0.0, deadline.timestamp() - utcnow().timestamp()) + 1.1)
    report = sweep(svc())
    assert report.expired == 1
    job = tenant.get_job(job_id).body
    assert job["status"] == "expired"
    assert job["error"]["timeout"] == "deadline"
    assert sweep(svc()).expired == 0  # idempotent


# --- sweeper: lost leases and lost retries ----------------------------------------------------
def test_sweeper_takes_back_a_dead_workers_job(tenant: ApiCaller, api_env: Provisioned) -> None:
    job_id = tenant.post_job(SIMPLE).body["job_id"]
    queued_messages(api_env)  # its worker deleted the message when it claimed the job
    claim(job_id, owner="dead-worker", lease_s=-(LEASE_GRACE_S + 5))
    report = sweep(svc())
    assert report.leases_recovered == 1
    job = tenant.get_job(job_id).body
    assert job["status"] == "retry_scheduled"
    assert job["error"]["kind"] == "lease_expired"
    # Ahead of the jobs still waiting for their first turn: on the pool's high queue.
    assert len(queued_messages(api_env, "standard-high")) == 1
    assert queued_messages(api_env) == []
    # The dead worker, if it comes back, can no longer write.
    with pytest.raises(Exception, match="lost its lease"):
        svc().store.finish(
            "acme",
            job_id,
            attempt=1,
            owner="dead-worker",
            status=JobStatus.SUCCEEDED,
            at=iso(utcnow()),
            result={},
            artifacts=[],
            error=None,
            history=AttemptRecord(attempt=1, worker="dead-worker", started_at=iso(utcnow())),
        )
    assert sweep(svc()).leases_recovered == 0


def test_sweeper_dead_letters_a_job_whose_workers_keep_dying_and_counts_it(
    tenant: ApiCaller, api_env: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    from functions.sweeper import handler as sweeper_fn

    RUNTIME.reset()
    job_id = tenant.post_job({**SIMPLE, "max_attempts": 10}).body["job_id"]
    for attempt in range(1, LEASES_LOST_LIMIT + 1):
        claim(job_id, owner=f"dead-{attempt}", lease_s=-(LEASE_GRACE_S + 5))
        capsys.readouterr()
        report = sweeper_fn.handler(scheduled_event(), None)
    assert report["leases_recovered"] == 0 and report["leases_dead_lettered"] == 1
    job = tenant.get_job(job_id).body
    assert job["status"] == "dead_lettered"
    assert f"stopped {LEASES_LOST_LIMIT} times" in job["error"]["message"]
    [blob] = [b for b in emf_blobs(capsys.readouterr().out) if metrics_names.DEAD_LETTERED in b]
    assert blob["service"] == metrics_names.DEAD_LETTERS_SERVICE  # what the alarm reads
    assert blob[metrics_names.DEAD_LETTERED] in (1, 1.0, [1], [1.0])


def test_sweeper_leaves_live_leases_alone(tenant: ApiCaller) -> None:
    job_id = tenant.post_job(SIMPLE).body["job_id"]
    claim(job_id, lease_s=60)
    assert sweep(svc()).leases_recovered == 0
    assert tenant.get_job(job_id).body["status"] == "running"


def test_sweeper_fails_a_lost_lease_with_no_attempts_left(tenant: ApiCaller) -> None:
    job_id = tenant.post_job({**SIMPLE, "max_attempts": 1}).body["job_id"]
    claim(job_id, lease_s=-(LEASE_GRACE_S + 5))
    assert sweep(svc()).leases_failed == 1
    job = tenant.get_job(job_id).body
    assert job["status"] == "failed"
    assert job["error"]["timeout"] == "lease"


def test_sweeper_resends_a_retry_whose_message_was_lost(
    tenant: ApiCaller, api_env: Provisioned
) -> None:
    job_id = tenant.post_job(SIMPLE).body["job_id"]
    queued_messages(api_env)
    claim(job_id)
    svc().store.finish(
        "acme",
        job_id,
        attempt=1,
        owner="w1",
        status=JobStatus.RETRY_SCHEDULED,
        at=iso(utcnow()),
        result=None,
        artifacts=[],
        error=JobError(kind="navigation", message="net::ERR_CONNECTION_RESET", retryable=True),
        history=AttemptRecord(attempt=1, worker="w1", started_at=iso(utcnow())),
        retry_at=now() - RETRY_GRACE_S - 5,
    )
    assert sweep(svc()).retries_resent == 1
    assert len(queued_messages(api_env, "standard-high")) == 1  # it waited its turn: ahead
    assert sweep(svc()).retries_resent == 0  # postponed, not re-sent every minute


def test_a_stale_copy_in_the_dlq_does_not_touch_a_job_with_a_live_lease(tenant: ApiCaller) -> None:
    from functions.dead_letters import handler as dl

    RUNTIME.reset()
    job = tenant.post_job(SIMPLE).body
    claim(job["job_id"], lease_s=60)
    dl.handler(sqs_event([_dlq_message(job), "poison"]), None)
    assert tenant.get_job(job["job_id"]).body["status"] == "running"
