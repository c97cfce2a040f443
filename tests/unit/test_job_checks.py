"""Validating a job request (``POST /v1/jobs/validate``): the checks submit runs, every
problem collected, nothing recorded; and the JSON Schema editors validate against."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import jsonschema
import pytest

from devstack.fakes import FakeClock, FakeQueue
from pagefleet.errors import InvalidRequest
from pagefleet.jobs.planning import Problem, validate_body
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.submission import SCHEMA_ID, JobSubmission, submission_schema
from pagefleet.workflow.versions import WorkflowDefinition, put_version

STEPS = [{"action": "goto", "url": "http://127.0.0.1:9/"}]


def validate(svc: JobServices, body: dict[str, Any]) -> list[Problem]:
    return validate_body(svc, "t", body)


def submit_error(svc: JobServices, body: dict[str, Any]) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        submit_job(svc, "t", JobSubmission.model_validate(body))
    return caught.value


def test_a_valid_request_has_no_problems_and_nothing_is_recorded_or_queued(
    svc: JobServices, queue: FakeQueue
) -> None:
    assert validate(svc, {"steps": STEPS, "name": "n", "priority": "high"}) == []
    assert svc.store.list_page("t", status=None, limit=10, start_key=None) == ([], None)
    assert queue.sent == []


def test_every_model_problem_is_reported_with_its_field() -> None:
    from devstack.fakes import fake_services

    problems = validate(
        fake_services(),
        {
            "steps": [{"action": "goto"}, {"action": "click"}],
            "priority": "urgent",
            "surprise": 1,
        },
    )
    fields = [p.field for p in problems]
    assert "priority" in fields and "surprise" in fields
    # Named as the 422 of POST /v1/jobs names them: the step's action, then its field.
    assert "steps[0].goto.url" in fields and "steps[1].click.selector" in fields
    assert all(p.message for p in problems)


def test_the_checks_that_need_the_tenants_data_are_all_reported(
    svc: JobServices, clock: FakeClock
) -> None:
    past = datetime.fromtimestamp(clock.now(), UTC) - timedelta(minutes=1)
    body = {
        "deadline": past.isoformat(),
        "depends_on": ["01jzzzzzzzzzzzzzzzzzzzzzzz", "01jyyyyyyyyyyyyyyyyyyyyyyy"],
        "notify": {"webhook": "http://169.254.169.254/latest/meta-data/"},
        "steps": [*STEPS, {"action": "evaluate", "expression": "1", "name": "x"}],
    }
    problems = validate(svc, body)
    assert [p.field for p in problems] == [
        "deadline",
        "depends_on[0]",
        "depends_on[1]",
        "notify.webhook",  # the submission policy's, after the request's own
        "steps[1]",  # the tenant may not evaluate
    ]
    # Submit stops at the first of the same checks.
    first = submit_error(svc, body)
    assert (first.field, first.message) == (problems[0].field, problems[0].message)


def test_a_named_workflow_must_exist_for_the_tenant_and_its_inputs_fit(svc: JobServices) -> None:
    assert svc.workflows is not None
    definition = {"steps": [{"action": "goto", "url": "{{inputs.site}}/x"}]}
    put_version(svc.workflows, "t", "shop", WorkflowDefinition.model_validate(definition), "x")
    assert validate(svc, {"workflow": "shop", "inputs": {"site": "http://127.0.0.1:9"}}) == []
    [missing] = validate(svc, {"workflow": "shop@2"})
    assert missing.field == "workflow" and "shop@2" in missing.message
    assert validate_body(svc, "u", {"workflow": "shop"})[0].field == (
        "workflow"
    )  # another tenant's workflow is not there
    unfit = validate(svc, {"workflow": "shop"})
    assert unfit and "site" in unfit[0].message
    error = submit_error(svc, {"workflow": "shop"})
    assert error.details["details"][0]["field"] == unfit[0].field


def test_the_schema_is_draft_2020_12_and_checks_what_the_model_checks() -> None:
    schema = submission_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == SCHEMA_ID and schema["title"]
    jsonschema.Draft202012Validator.check_schema(schema)
    for name in ("steps", "workflow", "inputs", "options", "priority", "delay_seconds"):
        assert name in schema["properties"]
    for name in ("run_at", "depends_on", "name"):
        assert name in schema["properties"]
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors({"steps": STEPS, "priority": "high"}))
    wrong = list(validator.iter_errors({"steps": STEPS, "priority": "urgent"}))
    assert [list(e.absolute_path) for e in wrong] == [["priority"]]
    schema["title"] = "changed"  # a caller's copy: the served schema stays as it is
    assert submission_schema()["title"] != "changed"
