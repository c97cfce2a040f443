"""One submission policy, whichever way a job is made: a webhook the egress policy refuses
and an ``evaluate`` step from a tenant not allowed to evaluate are refused at submit, 422
naming the field, by a single job, its validation, a batch's item, a schedule's creation and
change, a schedule's run (by hand and by the Scheduler's fire), a monitor and a named
workflow (a browser session saved as one) alike. Through the real handlers on moto."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.lambda_env.protocol import LambdaContext
from devstack.provision import Provisioned
from functions.scheduler.handler import handler as scheduler_handler
from pagefleet.jobs.models import TenantPolicy
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import CoreSettings
from pagefleet.targets import egress_policy
from tests.support.api import ApiCaller

PAGE = {"action": "goto", "url": "https://shop.example.com/"}
EVALUATE = {"action": "evaluate", "expression": "6 * 7", "name": "answer"}
METADATA = "http://169.254.169.254/latest/meta-data/"
HOOK = "https://hooks.example.com/pf"


@pytest.fixture(autouse=True)
def resolved(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """What each host resolves to, changed by a test as DNS might change (rebinding)."""
    table = {"hooks.example.com": ["93.184.216.34"]}

    def lookup(host: str) -> list[str]:
        if host in table:
            return table[host]
        raise OSError(-2, "Name or service not known (tests resolve nothing)")

    monkeypatch.setattr(egress_policy, "system_lookup", lookup)
    return table


def _webhook_job(url: str = METADATA) -> dict[str, Any]:
    return {"steps": [PAGE], "notify": {"webhook": url}}


def _evaluate_job() -> dict[str, Any]:
    return {"steps": [PAGE, EVALUATE]}


def _refused(resp: Any, field: str) -> str:
    assert resp.status == 422, resp.body
    assert resp.error["field"] == field, resp.body
    return str(resp.error["message"])


def _allow_evaluate(env: Provisioned, tenant: str, allowed: bool) -> None:
    RUNTIME.tenant_store(env.tenants_table).put_policy(tenant, TenantPolicy(allow_evaluate=allowed))


def _jobs(env: Provisioned, tenant: str) -> list[Any]:
    svc = RUNTIME.job_services(RUNTIME.settings(CoreSettings))
    jobs, _ = svc.store.list_page(tenant, status=None, limit=50, start_key=None)
    return jobs


def _fire(tenant: str, schedule_id: str, when: str) -> dict[str, Any]:
    event = {"tenant_id": tenant, "schedule_id": schedule_id, "scheduled_time": when}
    return scheduler_handler(
        event, LambdaContext("pagefleet-scheduler", request_id="r", timeout_s=30)
    )


@pytest.mark.parametrize(
    ("job", "field", "reason"),
    [
        (_webhook_job(), "notify.webhook", "webhook URL not allowed"),
        (_evaluate_job(), "steps[1]", "allow_evaluate"),
    ],
    ids=["metadata-webhook", "evaluate"],
)
def test_every_way_a_job_is_made_refuses_it_alike(
    alice: ApiCaller, api_env: Provisioned, job: dict[str, Any], field: str, reason: str
) -> None:
    assert reason in _refused(alice.call("POST", "/v1/jobs", job), field)

    checked = alice.call("POST", "/v1/jobs/validate", job)
    assert checked.status == 200 and checked.body["valid"] is False, checked.body
    assert [e["field"] for e in checked.body["errors"]] == [field]

    batch = alice.call("POST", "/v1/batches", {"jobs": [{"job": {"steps": [PAGE]}}, {"job": job}]})
    assert batch.status == 200, batch.body
    ok, bad = batch.body["results"]
    assert ok["status"] == 202 and bad["status"] == 422, batch.body
    assert bad["error"]["field"] == field and reason in bad["error"]["message"]

    schedule = {"name": "nightly", "expression": "rate(1 hour)"}
    made = alice.call("POST", "/v1/schedules", {**schedule, "job": job})
    assert reason in _refused(made, f"job.{field}")
    monitor = {
        **job,
        "expect": {"schema": {"type": "object", "required": ["products"]}},
        "monitor": {"track": {"products": {"key": "sku"}}},
    }
    assert reason in _refused(
        alice.call("POST", "/v1/schedules", {**schedule, "job": monitor}), f"job.{field}"
    )

    fine = alice.call("POST", "/v1/schedules", {**schedule, "job": {"steps": [PAGE]}})
    assert fine.status == 201, fine.body
    path = f"/v1/schedules/{fine.body['schedule_id']}"
    assert reason in _refused(alice.call("PATCH", path, {"job": job}), f"job.{field}")

    # Only the one job of the batch was made.
    assert len(_jobs(api_env, "alice")) == 1


def test_a_named_workflow_with_an_evaluate_step_is_refused_naming_the_workflow(
    alice: ApiCaller, api_env: Provisioned
) -> None:
    """What a browser session saved as a workflow becomes: a named workflow, run later."""
    saved = alice.call("PUT", "/v1/workflows/scripted", {"steps": [PAGE, EVALUATE]})
    assert saved.status in (200, 201), saved.body
    message = _refused(alice.call("POST", "/v1/jobs", {"workflow": "scripted"}), "workflow")
    assert "allow_evaluate" in message and "steps[1]" in message
    _allow_evaluate(api_env, "alice", True)
    assert alice.call("POST", "/v1/jobs", {"workflow": "scripted"}).status == 202


def test_a_schedules_runs_are_refused_once_its_tenant_may_no_longer_evaluate(
    alice: ApiCaller, api_env: Provisioned
) -> None:
    _allow_evaluate(api_env, "alice", True)
    made = alice.call(
        "POST", "/v1/schedules", {"name": "s", "expression": "rate(1 hour)", "job": _evaluate_job()}
    )
    assert made.status == 201, made.body
    schedule_id = made.body["schedule_id"]
    _allow_evaluate(api_env, "alice", False)  # a right taken back holds at the next run

    by_hand = alice.call("POST", f"/v1/schedules/{schedule_id}/run")
    assert "allow_evaluate" in _refused(by_hand, "job.steps[1]")

    fired = _fire("alice", schedule_id, "2026-12-03T14:00:00Z")
    assert fired["job_id"] is None
    assert fired["skipped"].startswith("refused: job.steps[1]: "), fired
    assert _jobs(api_env, "alice") == []
    runs = alice.call("GET", f"/v1/schedules/{schedule_id}/runs")
    assert [r["skipped"] for r in runs.body["skipped"]] == [fired["skipped"]]

    _allow_evaluate(api_env, "alice", True)
    again = _fire("alice", schedule_id, "2026-12-03T15:00:00Z")
    assert again["job_id"] is not None and again["skipped"] is None
    [job] = _jobs(api_env, "alice")
    assert job.job_id == again["job_id"] and job.status is JobStatus.QUEUED


def test_a_schedules_webhook_is_checked_again_at_each_run(
    alice: ApiCaller, api_env: Provisioned, resolved: dict[str, list[str]]
) -> None:
    """Its host's address may change after the schedule is made (DNS rebinding): a run to a
    name that now resolves to a private address is refused, as a POST /v1/jobs would be."""
    made = alice.call(
        "POST",
        "/v1/schedules",
        {"name": "s", "expression": "rate(1 hour)", "job": _webhook_job(HOOK)},
    )
    assert made.status == 201, made.body
    schedule_id = made.body["schedule_id"]
    resolved["hooks.example.com"] = ["10.0.0.7"]

    by_hand = alice.call("POST", f"/v1/schedules/{schedule_id}/run")
    assert "10.0.0.7" in _refused(by_hand, "job.notify.webhook")
    fired = _fire("alice", schedule_id, "2026-12-03T14:00:00Z")
    assert fired["job_id"] is None and "job.notify.webhook" in fired["skipped"]
    assert _jobs(api_env, "alice") == []

    resolved["hooks.example.com"] = ["93.184.216.34"]
    ran = alice.call("POST", f"/v1/schedules/{schedule_id}/run")
    assert ran.status == 202, ran.body
    assert ran.body["job"]["request"]["notify"]["webhook"] == HOOK
