"""The monitor's API through the real handlers on moto: expect's schema checked at validate
and submit, a run started now, the run counted into the schedule's health (as the stream
reader does), a pinned baseline, and what the schedule's and the job's views show."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.provision import Provisioned
from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.lifecycle import Outcome, Then
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import JobStatus
from pagefleet.monitors.changes import Changes, ChangeSummary
from pagefleet.runtime import RUNTIME
from pagefleet.schedules.watch import ScheduleWatch
from pagefleet.specs.settings import CoreSettings
from tests.support.api import ApiCaller

JOB: dict[str, Any] = {
    "steps": [{"action": "goto", "url": "https://shop.example/"}],
    "expect": {
        "schema": {"type": "object", "required": ["products"]},
        "min_items": {"products": 1},
    },
    "monitor": {"track": {"products": {"key": "sku"}}},
}


class NoNotices:
    def failed_run(self, job: JobRecord) -> None:
        pass

    def turned(self, schedule: Any, job: JobRecord, turn: Any) -> None:
        pass


@pytest.fixture
def api_svc(api_env: Provisioned) -> JobServices:
    return RUNTIME.job_services(RUNTIME.settings(CoreSettings))


def make_schedule(who: ApiCaller, **extra: Any) -> dict[str, Any]:
    made = who.call(
        "POST",
        "/v1/schedules",
        {"name": "prices", "expression": "rate(1 hour)", "job": JOB, **extra},
    )
    assert made.status == 201, made.body
    return dict(made.body)


def run_to_end(svc: JobServices, job_id: str, outcome: Outcome) -> JobRecord:
    """Play a worker on the real queue and table, then the stream reader's health count."""
    [received] = svc.queue.receive("standard", max_messages=1, wait_seconds=1, visibility=60)
    step = svc.lifecycle.claim(received, "standard", owner="w", lease_seconds=60, worker="w")
    assert step.then is Then.RUN and step.job is not None and step.job.job_id == job_id
    svc.lifecycle.finish(step.job, outcome, "w")
    ended = svc.store.get(step.job.tenant_id, job_id)
    change = JobChange(old=step.job, new=ended, sequence="1")
    ScheduleWatch(RUNTIME.schedule_store(RUNTIME.settings(CoreSettings)), NoNotices()).handle(
        [change]
    )
    return ended


def test_validate_and_submit_refuse_a_bad_schema_naming_expect_schema(alice: ApiCaller) -> None:
    bad = {**JOB, "expect": {"schema": {"type": "nope"}}}
    checked = alice.call("POST", "/v1/jobs/validate", bad)
    assert checked.status == 200 and checked.body["valid"] is False
    assert [e["field"] for e in checked.body["errors"]] == ["expect.schema"]
    refused = alice.call("POST", "/v1/jobs", bad)
    assert refused.status == 422 and refused.error["field"] == "expect.schema"
    assert alice.call("POST", "/v1/jobs/validate", JOB).body["valid"] is True
    no_shot = {**JOB, "monitor": {"screenshot": "page"}}
    refused = alice.call("POST", "/v1/jobs", no_shot)
    assert refused.status == 422 and "no screenshot step" in refused.error["message"]


def test_run_now_pin_a_baseline_and_the_schedules_health(
    alice: ApiCaller, bob: ApiCaller, api_svc: JobServices
) -> None:
    made = make_schedule(alice, enabled=False, alert={"after_failures": 1})
    sid = made["schedule_id"]
    assert (made["health"], made["consecutive_failures"], made["alert"]) == (
        "ok",
        0,
        {"after_failures": 1},
    )
    started = alice.call("POST", f"/v1/schedules/{sid}/run")
    assert started.status == 202, started.body
    first = started.body["job_id"]
    assert started.body["job"]["schedule_id"] == sid
    assert alice.call("GET", f"/v1/schedules/{sid}/runs").body["jobs"][0]["job_id"] == first
    changes = Changes(changed=True, summary=ChangeSummary(added=1), baseline_job_id=None)
    run_to_end(
        api_svc, first, Outcome(JobStatus.SUCCEEDED, result={"products": [1]}, changes=changes)
    )
    view = alice.call("GET", f"/v1/jobs/{first}").body
    assert view["changes"]["summary"]["added"] == 1 and view["changes"]["changed"] is True

    second = alice.call("POST", f"/v1/schedules/{sid}/run").body["job_id"]
    error = JobError(kind="data_quality", message="bad", details=[{"path": "result.products"}])
    run_to_end(api_svc, second, Outcome(JobStatus.FAILED, error=error))
    shown = alice.call("GET", f"/v1/schedules/{sid}").body
    assert (shown["health"], shown["consecutive_failures"]) == ("alerting", 1)
    assert shown["last_change"]["job_id"] == first and shown["last_success_job_id"] == first
    assert alice.call("GET", f"/v1/jobs/{second}").body["error"]["details"] == [
        {"path": "result.products"}
    ]

    # Pinning: a succeeded run of this schedule only, each refusal naming job_id.
    for job_id, status in ((second, 422), ("0" * 26, 422), ("nope", 422)):
        refused = alice.call("PUT", f"/v1/schedules/{sid}/baseline", {"job_id": job_id})
        assert refused.status == status and refused.error["field"] == "job_id", refused.body
    pinned = alice.call("PUT", f"/v1/schedules/{sid}/baseline", {"job_id": first})
    assert pinned.status == 200 and pinned.body["baseline_job_id"] == first
    unpinned = alice.call("PUT", f"/v1/schedules/{sid}/baseline", {"job_id": None})
    assert unpinned.body["baseline_job_id"] is None

    # Another tenant's schedule reads as not found, on every route.
    assert bob.call("POST", f"/v1/schedules/{sid}/run").status == 404
    assert bob.call("PUT", f"/v1/schedules/{sid}/baseline", {"job_id": first}).status == 404
