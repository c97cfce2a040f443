"""What the web console reads and checks through the API: the job request's JSON Schema,
validation without submitting, filtered job listings, workflow version diffs and the fleet
figures. Real authorizer and API handlers, API Gateway events, the session's moto server."""

from __future__ import annotations

import functools
import json
from typing import Any

import boto3
import jsonschema
import pytest
from typer.testing import CliRunner

from devstack.provision import Provisioned
from pagefleet import cli
from pagefleet.cli import common as cli_common
from pagefleet.client import PagefleetClient
from pagefleet.jobs import listing
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import ApiCaller, HttpResult, caller, gateway_transport

STEPS = [
    {"action": "goto", "url": "{{inputs.site}}/list.html"},
    {"action": "extract", "name": "title", "selector": "h1"},
]
JOB = {"steps": STEPS, "inputs": {"site": "http://127.0.0.1:9"}}
SCHEDULE = "01jschedule000000000000000"


def queued(env: Provisioned) -> int:
    sqs = boto3.client("sqs")
    total = 0
    for url in env.queue_urls.values():
        attrs = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )
        total += int(attrs["Attributes"]["ApproximateNumberOfMessages"])
    return total


# --- GET /v1/workflow.schema.json ---------------------------------------------------------------
def test_the_job_request_schema_is_served_to_a_key_holder(alice: ApiCaller) -> None:
    resp = alice.call("GET", "/v1/workflow.schema.json")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("application/schema+json")
    schema = resp.body
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] and schema["title"]
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors(JOB))
    assert list(validator.iter_errors({**JOB, "max_attempts": 99}))
    assert ApiCaller(None).call("GET", "/v1/workflow.schema.json").status == 401
    assert ApiCaller("pf_wrong").call("GET", "/v1/workflow.schema.json").status == 401


# --- POST /v1/jobs/validate ---------------------------------------------------------------------
def validate(who: ApiCaller, body: Any) -> HttpResult:
    return who.call("POST", "/v1/jobs/validate", body)


def test_a_valid_request_is_valid_and_nothing_is_made(
    alice: ApiCaller, api_env: Provisioned
) -> None:
    resp = validate(alice, {**JOB, "name": "n", "priority": "high", "delay_seconds": 30})
    assert resp.status == 200
    assert resp.body == {"valid": True, "errors": []}
    assert alice.call("GET", "/v1/jobs").body["jobs"] == []
    assert queued(api_env) == 0


def test_validation_does_not_spend_the_submission_rate(
    api_env: Provisioned, alice: ApiCaller
) -> None:
    admin = caller(api_env, "ops", admin=True)
    limits = {"submits_per_minute": 1, "burst": 1}
    assert admin.call("PATCH", "/v1/admin/tenants/alice/limits", limits).status == 200
    for _ in range(5):
        assert validate(alice, JOB).body["valid"] is True
    assert alice.post_job(JOB).status == 202
    assert alice.post_job(JOB).status == 429


@pytest.mark.parametrize(
    "body",
    [
        {"steps": []},
        {"steps": [{"action": "goto"}, {"action": "click"}], "priority": "urgent"},
        {**JOB, "surprise": 1, "max_attempts": 0},
        {**JOB, "inputs": {}},  # the steps read inputs.site
        {**JOB, "delay_seconds": 5, "run_at": "2030-01-01T00:00:00Z"},
        {"inputs": {"site": "x"}},  # neither steps nor a workflow
        {**JOB, "depends_on": ["01jzzzzzzzzzzzzzzzzzzzzzzz"]},
        {**JOB, "deadline": "2001-01-01T00:00:00Z"},
        {**JOB, "workflow": "shop"},  # both
        {"workflow": "nosuch@3"},
        {**JOB, "notify": {"webhook": "https://10.0.0.1/hook"}},
    ],
)
def test_validate_names_the_fields_submit_refuses(alice: ApiCaller, body: Any) -> None:
    refused = alice.post_job(body)
    assert 400 <= refused.status < 500, refused.body
    error = refused.error
    submit_problems = {(d["field"], d["reason"]) for d in error.get("details") or []}
    submit_problems = submit_problems or {(error["field"], error["message"])}
    checked = validate(alice, body)
    assert checked.status == 200, checked.body
    assert checked.body["valid"] is False
    problems = {(e["field"], e["message"]) for e in checked.body["errors"]}
    assert submit_problems <= problems, (submit_problems, problems)


def test_validate_reports_every_problem_at_once(alice: ApiCaller) -> None:
    body = {
        "steps": STEPS,
        "inputs": {"site": "http://127.0.0.1:9"},
        "deadline": "2001-01-01T00:00:00Z",
        "depends_on": ["01jzzzzzzzzzzzzzzzzzzzzzzz"],
        "notify": {"webhook": "https://10.0.0.1/hook"},
    }
    fields = [e["field"] for e in validate(alice, body).body["errors"]]
    assert fields == ["deadline", "depends_on[0]", "notify.webhook"]
    model = validate(alice, {"steps": [{"action": "goto"}, {"action": "click"}], "pool": "x"})
    assert {e["field"] for e in model.body["errors"]} == {
        "pool",
        "steps[0].goto.url",
        "steps[1].click.selector",
    }


def test_a_named_workflow_is_looked_up_in_the_callers_tenant(
    alice: ApiCaller, bob: ApiCaller
) -> None:
    definition = {"steps": STEPS, "inputs": {"site": "http://127.0.0.1:9"}}
    assert alice.call("PUT", "/v1/workflows/shop", definition).status == 201
    assert validate(alice, {"workflow": "shop"}).body == {"valid": True, "errors": []}
    assert validate(alice, {"workflow": "shop@1", "inputs": {"extra": 1}}).body["valid"]
    theirs = validate(bob, {"workflow": "shop"}).body
    assert theirs["valid"] is False
    assert [e["field"] for e in theirs["errors"]] == ["workflow"]
    missing = validate(alice, {"workflow": "shop@2"}).body["errors"]
    assert missing[0]["field"] == "workflow" and "shop@2" in missing[0]["message"]


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"steps"', b"42", b"null"])
def test_a_body_that_is_not_an_object_is_400(alice: ApiCaller, raw: bytes) -> None:
    resp = alice.call("POST", "/v1/jobs/validate", raw_body=raw)
    assert resp.status == 400
    assert resp.error["field"] == "body"


def test_a_body_that_is_not_json_is_400_and_get_is_not_a_job(alice: ApiCaller) -> None:
    resp = alice.call("POST", "/v1/jobs/validate", raw_body=b"{not json")
    assert resp.status == 400
    assert resp.error["code"] == "invalid_json"
    assert alice.call("POST", "/v1/jobs/validate").status == 400  # no body at all
    got = alice.call("GET", "/v1/jobs/validate")
    assert got.status == 422 and got.error["field"] == "job_id"  # "validate" is no job id
    assert "job_id" not in got.body


# --- GET /v1/jobs filters -----------------------------------------------------------------------
def submit_scheduled(tenant: str, body: dict[str, Any]) -> str:
    """A job as the scheduler makes it (the API has no route to set a schedule id)."""
    from functions.api import app as api_app
    from pagefleet.jobs.service import submit_job
    from pagefleet.jobs.submission import JobSubmission

    made = submit_job(
        api_app.services(),
        tenant,
        JobSubmission.model_validate(body),
        schedule=(SCHEDULE, "2026-12-01T00:00:00Z"),
    )
    return made.job.job_id


def every_job(who: ApiCaller, query: str, limit: int = 2) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        paging = f"limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        page = who.call("GET", "/v1/jobs", query=f"{query}&{paging}")
        assert page.status == 200, page.body
        assert len(page.body["jobs"]) <= limit
        seen += [j["job_id"] for j in page.body["jobs"]]
        cursor = page.body["next_cursor"]
        if not cursor:
            return seen


def test_jobs_are_listed_by_name_workflow_and_schedule_filters_combined(
    alice: ApiCaller, bob: ApiCaller
) -> None:
    assert alice.call("PUT", "/v1/workflows/shop", JOB).status == 201
    named = [alice.post_job({**JOB, "name": "nightly"}).body["job_id"] for _ in range(3)]
    shop = [alice.post_job({"workflow": "shop"}).body["job_id"] for _ in range(2)]
    scheduled = [submit_scheduled("alice", {**JOB, "name": "nightly"}) for _ in range(2)]
    alice.post_job({**JOB, "name": "title"})  # "title" is also a step's name in every job
    bob.post_job({**JOB, "name": "nightly"})
    newest = lambda ids: sorted(ids, reverse=True)  # noqa: E731

    assert every_job(alice, "name=nightly") == newest(named + scheduled)
    assert every_job(alice, "workflow=shop") == newest(shop)
    assert every_job(alice, f"schedule_id={SCHEDULE}") == newest(scheduled)
    assert every_job(alice, f"name=nightly&schedule_id={SCHEDULE}") == newest(scheduled)
    assert len(every_job(alice, "name=title")) == 1
    assert alice.call("POST", f"/v1/jobs/{named[0]}/cancel").status == 200
    assert every_job(alice, "status=cancelled&name=nightly") == [named[0]]
    assert every_job(alice, "status=queued&name=nightly") == newest(named[1:] + scheduled)
    listed = alice.call("GET", "/v1/jobs", query="workflow=shop").body["jobs"]
    assert {j["workflow"] for j in listed} == {"shop"}


def test_a_cursor_works_only_with_the_filters_it_was_made_with(alice: ApiCaller) -> None:
    for _ in range(3):
        alice.post_job({**JOB, "name": "a"})
    cursor = alice.call("GET", "/v1/jobs", query="name=a&limit=1").body["next_cursor"]
    assert cursor
    ok = alice.call("GET", "/v1/jobs", query=f"name=a&limit=1&cursor={cursor}")
    assert ok.status == 200 and len(ok.body["jobs"]) == 1
    for other in ("name=b", "", "name=a&workflow=shop", "name=a&status=queued"):
        resp = alice.call("GET", "/v1/jobs", query=f"{other}&cursor={cursor}".lstrip("&"))
        assert resp.status == 400, (other, resp.body)
        assert resp.error["field"] == "cursor"


def test_a_filtered_page_may_be_short_and_still_go_on(
    alice: ApiCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "READ_ITEMS", 2)
    monkeypatch.setattr(listing, "MAX_READS", 2)
    rare = alice.post_job({**JOB, "name": "rare"}).body["job_id"]
    for _ in range(6):
        alice.post_job(JOB)
    first = alice.call("GET", "/v1/jobs", query="name=rare&limit=2").body
    assert len(first["jobs"]) < 2 and first["next_cursor"]
    assert every_job(alice, "name=rare") == [rare]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("workflow=bad name", "workflow"),
        ("schedule_id=short", "schedule_id"),
        ("name=", "name"),
        ("name=" + "x" * 201, "name"),
    ],
)
def test_bad_filters_are_4xx_naming_them(alice: ApiCaller, query: str, field: str) -> None:
    resp = alice.call("GET", "/v1/jobs", query=query)
    assert 400 <= resp.status < 500
    assert resp.error["field"] == field


# --- GET /v1/workflows/{name}/diff --------------------------------------------------------------
def test_two_versions_are_diffed_as_sorted_indented_json(alice: ApiCaller, bob: ApiCaller) -> None:
    first = {"steps": STEPS, "inputs": {"site": "http://127.0.0.1:9"}}
    second = {**first, "inputs": {"site": "http://127.0.0.1:10"}, "options": {"locale": "fr-FR"}}
    for definition in (first, second):
        assert alice.call("PUT", "/v1/workflows/shop", definition).status == 201
    resp = alice.call("GET", "/v1/workflows/shop/diff", query="from=1&to=2")
    assert resp.status == 200, resp.body
    body = resp.body
    assert (body["name"], body["from_version"], body["to_version"]) == ("shop", 1, 2)
    assert body["changed"] is True
    lines = body["diff"].splitlines()
    assert lines[:2] == ["--- shop@1", "+++ shop@2"]
    assert '-    "site": "http://127.0.0.1:9"' in lines
    assert '+    "site": "http://127.0.0.1:10"' in lines
    assert '+    "locale": "fr-FR"' in lines
    same = alice.call("GET", "/v1/workflows/shop/diff", query="from=2&to=2").body
    assert same["changed"] is False and same["diff"] == ""
    back = alice.call("GET", "/v1/workflows/shop/diff", query="from=2&to=1").body
    assert '+    "site": "http://127.0.0.1:9"' in back["diff"].splitlines()
    assert bob.call("GET", "/v1/workflows/shop/diff", query="from=1&to=2").status == 404


@pytest.mark.parametrize(
    ("path", "query", "status", "field"),
    [
        ("nosuch", "from=1&to=2", 404, "name"),
        ("shop", "from=1&to=3", 404, "to"),
        ("shop", "from=9&to=1", 404, "from"),
        ("shop", "from=abc&to=1", 400, "from"),
        ("shop", "from=1&to=0", 400, "to"),
        ("shop", "from=1&to=-1", 400, "to"),
        ("shop", "to=1", 400, "from"),
        ("shop", "from=1", 400, "to"),
        ("shop", "from=1&to=1.5", 400, "to"),
    ],
)
def test_missing_or_bad_versions_name_their_field(
    alice: ApiCaller, path: str, query: str, status: int, field: str
) -> None:
    assert alice.call("PUT", "/v1/workflows/shop", {"steps": STEPS[:1]}).status == 201
    resp = alice.call("GET", f"/v1/workflows/{path}/diff", query=query)
    assert resp.status == status, resp.body
    assert resp.error["field"] == field


# --- GET /v1/stats ------------------------------------------------------------------------------
def test_the_fleet_figures_cover_what_the_console_shows(alice: ApiCaller) -> None:
    for _ in range(2):
        alice.post_job(JOB)
    resp = alice.call("GET", "/v1/stats")
    assert resp.status == 200
    figures = resp.body
    assert figures["counts"]["queued"] == 2 and figures["counts"]["running"] == 0
    assert figures["oldest_queued_age_s"] is not None and figures["oldest_queued_age_s"] >= 0
    for rate in ("success_rate", "failure_rate", "timeout_rate", "retry_rate"):
        assert rate in figures
    for spread in ("duration_s", "queue_delay_s"):
        assert set(figures[spread]) == {"p50", "p95", "p99"}


# --- the SDK and the CLI ------------------------------------------------------------------------
def test_the_sdk_and_the_cli_list_with_filters_validate_and_diff(
    api_env: Provisioned, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "carol")
    transport = gateway_transport()
    with PagefleetClient("http://gateway.test", key, transport=transport) as client:
        client.put_workflow("shop", JOB)
        client.put_workflow("shop", {**JOB, "inputs": {"site": "http://127.0.0.1:10"}})
        shop = client.submit({"workflow": "shop"}).job_id
        named = client.submit({**JOB, "name": "nightly"}).job_id
        assert [j.job_id for j in client.list(workflow="shop").jobs] == [shop]
        assert [j.job_id for j in client.iter_jobs(name="nightly", page_size=1)] == [named]
        assert client.list(name="nightly", workflow="shop").jobs == []
        assert client.validate(JOB).valid is True
        refused = client.validate({"workflow": "nope"})
        assert not refused.valid and refused.errors[0].field == "workflow"
        assert client.workflow_schema()["$schema"].endswith("2020-12/schema")
        diff = client.workflow_diff("shop", 1, 2)
        assert diff.changed and '+    "site": "http://127.0.0.1:10"' in diff.diff

    monkeypatch.setattr(
        cli_common, "PagefleetClient", functools.partial(PagefleetClient, transport=transport)
    )
    runner = CliRunner()
    env = {"PAGEFLEET_API_URL": "http://gateway.test", "PAGEFLEET_API_KEY": key}
    listed = runner.invoke(cli.app, ["jobs", "--workflow", "shop", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    assert [j["job_id"] for j in json.loads(listed.output)["jobs"]] == [shop]
    listed = runner.invoke(cli.app, ["jobs", "--name", "nightly", "--json"], env=env)
    assert [j["job_id"] for j in json.loads(listed.output)["jobs"]] == [named]
    diffed = runner.invoke(cli.app, ["workflows", "diff", "shop", "1", "2"], env=env)
    assert diffed.exit_code == 0, diffed.output
    assert "+++ shop@2" in diffed.output
