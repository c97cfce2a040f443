"""Irreversible steps as users write them and as the platform reports them: the workflow
language (irreversible, check, compensate, {{job.*}}), the notifications of a job that
needs review, its expiry, and how it reads to a follower."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from devstack.fakes.notify import FakeDeliveries, FakeEventBus, FakeNotifyDefaults, FakeWebhookQueue
from devstack.fakes.workflows import FakeWorkflowStore
from pagefleet.errors import InvalidField
from pagefleet.jobs.changes import JobChange
from pagefleet.jobs.checkpoints import Checkpoint
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.planning import Problems, plan_job
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.submission import JobSubmission, resolve_submission, submission_schema
from pagefleet.live.messages import status_message
from pagefleet.notify.eventbridge import REVIEW_DETAIL_TYPE, JobFinishedEvents
from pagefleet.notify.webhooks import WebhookNotifier
from pagefleet.tenancy.retention import RetentionConsumer
from pagefleet.workflow.templating import job_fields, render
from pagefleet.workflow.versions import WorkflowDefinition, WorkflowVersion

SITE = "http://127.0.0.1:9"
PLACE = {"action": "click", "selector": "#place", "irreversible": True}
CHECK = [
    {"action": "goto", "url": SITE + "/orders?ref={{job.id}}"},
    {"action": "assert", "selector": ".order", "visible": True},
]


def body(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"steps": [{"action": "goto", "url": SITE + "/"}, *steps], **extra}


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as refused:
        JobRequest.model_validate(data)
    return str(refused.value)


# --- the language ---------------------------------------------------------------------------
def test_any_step_may_be_irreversible_with_a_read_only_check() -> None:
    request = JobRequest.model_validate(body({**PLACE, "check": CHECK}))
    assert request.steps[1].irreversible and request.steps[1].check is not None
    assert "check is for irreversible steps" in refusal(
        body({"action": "click", "selector": "#x", "check": CHECK})
    )
    # A check only looks: a click in it is refused, by the schema too.
    acting = [{"action": "click", "selector": "#cancel"}]
    assert "does not match any of the expected tags" in refusal(body({**PLACE, "check": acting}))
    assert "Input should be False" in refusal(
        body({**PLACE, "check": [{**CHECK[0], "irreversible": True}]})
    )
    assert "check.0.goto.check" in refusal(body({**PLACE, "check": [{**CHECK[0], "check": CHECK}]}))
    schema = json.dumps(submission_schema())
    assert '"irreversible"' in schema and '"compensate"' in schema and '"check"' in schema


def test_only_top_level_steps_are_irreversible_and_compensate_needs_one() -> None:
    paginated = {"action": "paginate", "next": "a.next", "steps": [PLACE]}
    assert "inside a block" in refusal(body(paginated))
    assert "no step is irreversible" in refusal(body(compensate=[{"action": "goto", "url": SITE}]))
    assert "compensating steps run once already" in refusal(body(PLACE, compensate=[{**PLACE}]))
    assert "at most 20" in refusal(body(*[PLACE] * 21))


def test_a_plain_step_stores_and_hashes_as_before() -> None:
    plain = JobSubmission.model_validate(body({"action": "click", "selector": "#x"}))
    dumped = plain.model_dump(mode="json")
    assert all("irreversible" not in s and "check" not in s for s in dumped["steps"])
    assert plain.steps is not None and plain.steps[1].describe() == (
        "click(selector='#x', button='left', click_count=1)"
    )


def test_job_fields_template_and_unknown_ones_are_refused() -> None:
    fields = job_fields("01jabc", "order-7")
    assert render("ref={{job.id}}/{{ job.idempotency_key }}", {}, {}, job=fields) == (
        "ref=01jabc/order-7"
    )
    with pytest.raises(KeyError, match=r"job\.idempotency_key"):
        render("{{job.idempotency_key}}", {}, {}, job=job_fields("01jabc", None))
    assert "a job has {{job.id}} and {{job.idempotency_key}}" in refusal(
        body({"action": "fill", "selector": "#r", "value": "{{job.reference}}"})
    )
    assert "options cannot use {{job.id}}" in refusal(
        body(options={"extra_headers": {"X-Ref": "{{job.id}}"}})
    )


def test_a_workflow_using_the_idempotency_key_needs_one(svc: JobServices) -> None:
    uses_key = JobRequest.model_validate(
        body({"action": "fill", "selector": "#r", "value": "{{job.idempotency_key}}"})
    )
    with pytest.raises(InvalidField, match="Idempotency-Key header"):
        plan_job(svc, "t", uses_key, Problems(collect=False))
    planned = plan_job(svc, "t", uses_key, Problems(collect=False), idempotency_key="order-7")
    assert planned is not None


def test_a_named_workflows_compensate_comes_with_it_unless_the_job_gives_its_own() -> None:
    store = FakeWorkflowStore()
    undo = [{"action": "goto", "url": SITE + "/undo"}]
    definition = WorkflowDefinition.model_validate(body(PLACE, compensate=undo))
    store.put_version(
        "t", WorkflowVersion(name="shop", version=1, definition=definition, created_at="x")
    )
    named = resolve_submission(JobSubmission.model_validate({"workflow": "shop"}), "t", store)
    assert named.request.compensate is not None
    assert named.request.compensate[0].url == SITE + "/undo"  # type: ignore[union-attr]
    own = [{"action": "goto", "url": SITE + "/mine"}]
    given = JobSubmission.model_validate({"workflow": "shop", "compensate": own})
    mine = resolve_submission(given, "t", store).request.compensate
    assert mine is not None and mine[0].url == SITE + "/mine"  # type: ignore[union-attr]


# --- how a job in review is reported --------------------------------------------------------
def in_review(**kw: Any) -> JobRecord:
    checkpoint = Checkpoint.model_validate(
        {"step": 1, "label": "Place", "state": "unknown", "attempt": 1, "at": "2027-01-15T08:00Z"}
    )
    return JobRecord.model_validate(
        {
            "tenant_id": "t",
            "job_id": "j1",
            "status": JobStatus.NEEDS_REVIEW,
            "request": JobRequest.model_validate(
                body(PLACE, notify={"webhook": "https://hooks.example.com/pf"})
            ),
            "created_at": "2027-01-15T08:00:00.000Z",
            "updated_at": "2027-01-15T08:00:09.000Z",
            "correlation_id": "corr-1",
            "pool": "standard",
            "attempt": 1,
            "checkpoints": [checkpoint],
            **kw,
        }
    )


def moved(old: JobStatus, new: JobRecord) -> JobChange:
    return JobChange(old=new.model_copy(update={"status": old}), new=new, sequence="1")


def test_a_job_going_to_review_is_told_to_its_webhook_and_to_eventbridge() -> None:
    queue = FakeWebhookQueue()
    WebhookNotifier(queue, FakeNotifyDefaults(), FakeDeliveries(), retention_s=60).handle(
        [moved(JobStatus.RUNNING, in_review())]
    )
    (message,) = queue.sent
    sent = json.loads(message["body"])
    assert sent["event"] == "job.needs_review" and sent["status"] == "needs_review"
    assert sent["checkpoints"][0]["state"] == "unknown"
    bus = FakeEventBus()
    JobFinishedEvents(bus, FakeDeliveries(), retention_s=60).handle(
        [moved(JobStatus.RUNNING, in_review())]
    )
    assert [e["detail-type"] for e in bus.events] == [REVIEW_DETAIL_TYPE]


def test_a_follower_stops_at_review_and_its_record_expires_until_resolved() -> None:
    assert status_message(in_review())["final"] is True
    data = ExpiryData()
    consumer = RetentionConsumer(data, lambda tenant: _limits())
    consumer.handle([moved(JobStatus.RUNNING, in_review())])
    assert data.asked == ["set_expiry needs_review"]
    queued = in_review().model_copy(update={"status": JobStatus.QUEUED})
    consumer.handle([JobChange(old=in_review(), new=queued, sequence="2")])
    assert data.asked == ["set_expiry needs_review", "clear_expiry"]


class ExpiryData:
    """The job-data port, as far as expiry goes: what was asked of it."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def set_expiry(self, tenant_id: str, job_id: str, expires_at: int, *, status: Any) -> None:
        self.asked.append(f"set_expiry {status.value}")

    def clear_expiry(self, tenant_id: str, job_id: str) -> None:
        self.asked.append("clear_expiry")

    def delete_artifacts(self, tenant_id: str, job_id: str) -> int:
        raise AssertionError("not a deletion")

    def delete_items(self, tenant_id: str, job_id: str, idempotency_key: str | None) -> int:
        raise AssertionError("not a deletion")

    def request_delete(self, tenant_id: str, job_id: str, at: str) -> None:
        raise AssertionError("not a deletion")


def _limits() -> Any:
    from pagefleet.jobs.models import TenantPolicy
    from pagefleet.specs.tenant_defaults import LimitDefaults
    from pagefleet.tenancy.limits import effective_limits

    return effective_limits(TenantPolicy(), LimitDefaults())
