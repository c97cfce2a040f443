"""Issue 38's request shapes through the API handlers on moto: each bad field is a 422
naming it (submit and POST /v1/jobs/validate alike), and the JSON Schema carries them."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.provision import Provisioned
from pagefleet.jobs.models import JobRequest
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import ApiCaller

GOTO = {"action": "goto", "url": "http://127.0.0.1:9/"}


@pytest.fixture
def caller(api_env: Provisioned) -> ApiCaller:
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "tenant-a")
    return ApiCaller(key)


def job(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"steps": [GOTO, *steps], **extra}


@pytest.mark.parametrize(
    ("body", "field", "reason_part"),
    [
        (job(options={"dialogs": "maybe"}), "options.dialogs", "'accept' or 'dismiss'"),
        (job(options={"har": "sometimes"}), "options.har", "on_failure"),
        (
            job({"action": "save_session", "name": "my login"}),
            "steps[1].save_session.name",
            "should match pattern",
        ),
        (job({"action": "use_session", "name": ""}), "steps[1].use_session.name", "at least 1"),
        (job(options={"prompt_text": "x" * 10_001}), "options.prompt_text", "at most 10000"),
        (job({"action": "dialog", "type": "popup"}), "steps[1].dialog.type", "'alert'"),
        (
            job({"action": "dialog", "message_contains": ""}),
            "steps[1].dialog.message_contains",
            "at least 1",
        ),
        (job({"action": "drag", "selector": "#a"}), "steps[1].drag.target", "Field required"),
        (
            job(
                {
                    "action": "drag",
                    "selector": "#a",
                    "target": "#b",
                    "source_position": {"x": -1, "y": 0},
                }
            ),
            "steps[1].drag.source_position.x",
            "greater than or equal to 0",
        ),
        (
            job({"action": "upload", "selector": "#f"}, inputs={"a": "x"}),
            "steps[1].upload",
            "input and filename",
        ),
        (
            job(
                {
                    "action": "upload",
                    "selector": "#f",
                    "input": "a",
                    "filename": "a",
                    "files": [{"input": "a", "filename": "b"}],
                },
                inputs={"a": "x"},
            ),
            "steps[1].upload",
            "not both",
        ),
        (
            job(
                {
                    "action": "upload",
                    "selector": "#f",
                    "filename": "a.txt",
                    "content": "x" * 100_001,
                }
            ),
            "steps[1].upload.content",
            "at most 100000",
        ),
        (
            job(
                {
                    "action": "upload",
                    "selector": "#f",
                    "input": "a",
                    "content": "x",
                    "filename": "a",
                },
                inputs={"a": "x"},
            ),
            "steps[1].upload",
            "input (a job input) or content (the file): not both",
        ),
        (
            job(
                {
                    "action": "upload",
                    "selector": "#f",
                    "files": [{"filename": "b", "content": "x", "input": "a"}],
                },
                inputs={"a": "x"},
            ),
            "steps[1].upload.files[0]",
            "exactly one",
        ),
        (
            job({"action": "upload", "selector": "#f", "files": []}),
            "steps[1].upload.files",
            "at least 1",
        ),
        (
            job(
                {
                    "action": "upload",
                    "selector": "#f",
                    "files": [{"input": "a", "filename": "x/y"}],
                },
                inputs={"a": "x"},
            ),
            "steps[1].upload.files[0].filename",
            "pattern",
        ),
        (
            job(
                {
                    "action": "upload",
                    "selector": "#f",
                    "files": [{"input": "nope", "filename": "b"}],
                },
                inputs={"a": "x"},
            ),
            "body",
            "uploads input 'nope'",
        ),
        (job(options={"block": {}}), "options.block", "resource_types or urls"),
        (
            job(options={"block": {"resource_types": ["script"]}}),
            "options.block.resource_types[0]",
            "'image'",
        ),
        (job(options={"block": {"urls": [""]}}), "options.block.urls", "1 to 2000"),
        (job({"action": "route", "url": "**/api"}), "steps[1].route", "exactly one of abort"),
        (
            job({"action": "route", "url": "**", "abort": True, "fulfill": {}}),
            "steps[1].route",
            "exactly one of abort",
        ),
        (
            job({"action": "route", "url": "**", "fulfill": {"status": 700}}),
            "steps[1].route.fulfill.status",
            "less than or equal to 599",
        ),
        (
            job({"action": "route", "url": "**", "fulfill": {"bodyy": "x"}}),
            "steps[1].route.fulfill.bodyy",
            "Extra inputs",
        ),
    ],
)
def test_bad_fields_are_422_naming_the_field_on_submit_and_validate(
    caller: ApiCaller, body: dict[str, Any], field: str, reason_part: str
) -> None:
    refused = caller.post_job(body)
    assert refused.status == 422, refused.body
    error = refused.error
    details = error.get("details") or [{"field": error["field"], "reason": error["message"]}]
    assert any(d["field"] == field and reason_part in d["reason"] for d in details), error
    checked = caller.call("POST", "/v1/jobs/validate", body)
    assert checked.status == 200 and checked.body["valid"] is False
    assert any(e["field"] == field for e in checked.body["errors"]), checked.body


def test_the_new_shapes_are_valid_and_in_the_json_schema(caller: ApiCaller) -> None:
    body = job(
        {"action": "dialog", "accept": True, "prompt_text": "Ada", "message_contains": "name"},
        {"action": "drag", "selector": "#a", "target": "#b"},
        {"action": "upload", "selector": "#f", "files": [{"input": "a", "filename": "a.txt"}]},
        {"action": "route", "url": "**/api/*", "fulfill": {"status": 201, "body": "{}"}},
        {"action": "route", "url": "**/ads/**", "abort": True},
        inputs={"a": "x"},
        options={
            "dialogs": "accept",
            "prompt_text": "yes",
            "block": {"resource_types": ["image", "font"], "urls": ["**/*.mp4"]},
        },
    )
    assert caller.call("POST", "/v1/jobs/validate", body).body == {"valid": True, "errors": []}
    assert caller.post_job(body).status == 202
    schema = JobRequest.model_json_schema()
    defs = schema["$defs"]
    assert {"Dialog", "Drag", "UploadFile", "Route", "Fulfill", "BlockOptions"} <= set(defs)
    assert set(defs["JobOptions"]["properties"]) >= {"dialogs", "prompt_text", "block", "har"}
    assert {"SaveSession", "UseSession"} <= set(defs)
    assert "files" in defs["Upload"]["properties"]
