"""Hostile and unusual requests: each gets a clear 4xx naming the problem, never a 5xx.

Every request goes through the real authorizer and API handler (API Gateway REST events)
against the session's moto server.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import boto3
import pytest

from devstack.provision import Provisioned
from functions.api.handler import handler as api_handler
from functions.authorizer.handler import handler as authorizer_handler
from pagefleet.adapters.dynamodb.codec import job_sk, tenant_pk
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import ApiCaller, HttpResult
from tests.support.apigw import rest_event, token_event

README = Path(__file__).resolve().parents[2] / "README.md"
STEPS = [
    {"action": "goto", "url": "http://127.0.0.1:9/"},
    {"action": "extract", "name": "title", "selector": "h1"},
]
JOB = {"steps": STEPS}


@pytest.fixture
def api_key(api_env: Provisioned) -> str:
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "tenant-h")
    return key


@pytest.fixture
def caller(api_key: str) -> ApiCaller:
    return ApiCaller(api_key)


def call_event(api_key: str, event: dict[str, Any]) -> HttpResult:
    """Send a hand-shaped event (e.g. without Content-Type) through authorizer and API."""
    policy = authorizer_handler(token_event(f"Bearer {api_key}", event["httpMethod"]), None)
    event["requestContext"]["authorizer"] = policy["context"]
    resp = api_handler(event, None)
    headers = dict(resp.get("headers") or {})
    headers.update({k: v[-1] for k, v in (resp.get("multiValueHeaders") or {}).items()})
    return HttpResult(resp["statusCode"], headers, json.loads(resp["body"]))


def assert_4xx(resp: HttpResult, status: int, field: str, *words: str) -> None:
    assert resp.status == status, resp.body
    error = resp.error
    assert error["field"] == field, error
    for word in words:
        assert word in error["message"], error


# --- bodies: JSON whatever the Content-Type ------------------------------------------------
@pytest.mark.parametrize(
    "content_type",
    [
        "application/x-www-form-urlencoded",  # what curl -d sends
        "text/plain",
        "application/xml",
        "*/*",
        "multipart/form-data",  # without a boundary
        "application/json; charset=utf-8",
    ],
)
def test_json_body_is_accepted_whatever_the_content_type(
    caller: ApiCaller, content_type: str
) -> None:
    resp = caller.post_job(JOB, headers={"Content-Type": content_type})
    assert resp.status == 202, resp.body
    assert caller.get_job(resp.body["job_id"]).body["request"]["steps"][0]["url"].endswith(":9/")


def readme_curl_bodies() -> list[str]:
    """The -d '...' bodies of the README's curl lines."""
    bodies = re.findall(r"curl [^`]*?-d '([^']*)'", README.read_text())
    assert bodies, "the README has no curl line with a body"
    return bodies


@pytest.mark.parametrize("content_type", [None, "application/x-www-form-urlencoded"])
def test_readme_curl_bodies_are_accepted(api_key: str, content_type: str | None) -> None:
    for body in readme_curl_bodies():
        event = rest_event("POST", "/v1/jobs", body=body, headers={"Idempotency-Key": "order-42"})
        for headers in (event["headers"], event["multiValueHeaders"]):
            headers.pop("Content-Type")
            if content_type:
                headers["Content-Type"] = (
                    content_type if headers is event["headers"] else [content_type]
                )
        resp = call_event(api_key, event)
        assert resp.status == 202, resp.body
        assert resp.body["status"] == "queued"
        assert resp.headers["Location"] == f"/v1/jobs/{resp.body['job_id']}"


@pytest.mark.parametrize(
    ("raw", "code", "words"),
    [
        (b"\xff\xfe{\x00}\x00", "invalid_encoding", ("not UTF-8", "UTF-16")),  # UTF-16 LE
        (b"\xff\xfe{}", "invalid_encoding", ("not UTF-8",)),
        ('{"name": "caf\xe9"}'.encode("latin-1"), "invalid_encoding", ("not UTF-8",)),
        (b"{not json", "invalid_json", ("not valid JSON",)),
        (b"steps=goto", "invalid_json", ("not valid JSON",)),  # a real form body
        (b'{"steps": [], "inputs": {"a": NaN}}', "invalid_json", ("NaN",)),
        (b'{"steps": [], "inputs": {"a": 1e999}}', "invalid_json", ("out of range",)),
    ],
)
def test_bodies_that_are_not_json_text_are_400(
    caller: ApiCaller, raw: bytes, code: str, words: tuple[str, ...]
) -> None:
    resp = caller.call("POST", "/v1/jobs", raw_body=raw, headers={"Content-Type": "text/plain"})
    assert_4xx(resp, 400, "body", *words)
    assert resp.error["code"] == code


def test_utf8_body_sent_base64_encoded_is_decoded(caller: ApiCaller) -> None:
    # API Gateway base64-encodes bodies of binary media types; a JSON body is still JSON.
    body = json.dumps({**JOB, "name": "café ☕"}).encode()
    event = rest_event("POST", "/v1/jobs", body=base64.b64encode(body).decode())
    event["isBase64Encoded"] = True
    resp = call_event(str(caller.api_key), event)
    assert resp.status == 202, resp.body
    assert resp.body["job"]["request"]["name"] == "café ☕"


def test_deeply_nested_json_is_400(caller: ApiCaller) -> None:
    for depth in (100, 1_000, 100_000):
        resp = caller.call("POST", "/v1/jobs", body="[" * depth + "]" * depth)
        assert_4xx(resp, 400, "body", "nesting")


def test_integer_literal_over_4300_digits_is_400(caller: ApiCaller) -> None:
    resp = caller.call("POST", "/v1/jobs", body='{"steps": [], "max_attempts": ' + "9" * 5000 + "}")
    assert_4xx(resp, 400, "body", "more than 4300 digits")


def nested_paginate(levels: int) -> dict[str, Any]:
    step: dict[str, Any] = {"action": "extract", "name": "t", "selector": "h1"}
    for _ in range(levels):
        step = {"action": "paginate", "next": "a.next", "steps": [step]}
    return {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}, step]}


def test_paginate_blocks_nest_at_most_three_levels(caller: ApiCaller) -> None:
    assert caller.post_job(nested_paginate(3)).status == 202
    resp = caller.post_job(nested_paginate(4))
    assert_4xx(resp, 422, "steps", "steps[1].steps[0].steps[0].steps[0]", "at most 3 levels")
    # 200 levels never reach the models: the JSON is already too deep.
    assert_4xx(caller.post_job(nested_paginate(200)), 400, "body", "nesting")


# --- cursors --------------------------------------------------------------------------------
def forged(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "key",
    [
        {"sk": "JOB#zzz"},
        {"pk": "TENANT#tenant-h"},
        {"pk": "TENANT#tenant-h", "sk": "JOB#zzz", "status_pk": "tenant-h#queued", "x": "1"},
        {"pk": "TENANT#tenant-h", "sk": ""},
        {"pk": "TENANT#tenant-h", "sk": "JOB#" + "a" * 2000},
        {"pk": "TENANT#tenant-h", "sk": {"S": "JOB#1"}},
        {"status_pk": "tenant-h#queued"},
    ],
)
@pytest.mark.parametrize("status", ["", "&status=queued"])
def test_forged_cursors_are_400(caller: ApiCaller, key: dict[str, Any], status: str) -> None:
    caller.post_job(JOB)
    resp = caller.call("GET", "/v1/jobs", query=f"cursor={forged(key)}{status}")
    assert_4xx(resp, 400, "cursor")


def test_cursor_works_only_with_the_listing_that_issued_it(caller: ApiCaller) -> None:
    for _ in range(3):
        caller.post_job(JOB)
    by_status = caller.call("GET", "/v1/jobs", query="limit=1&status=queued").body["next_cursor"]
    plain = caller.call("GET", "/v1/jobs", query="limit=1").body["next_cursor"]
    assert caller.call("GET", "/v1/jobs", query=f"status=queued&cursor={by_status}").status == 200
    assert caller.call("GET", "/v1/jobs", query=f"cursor={plain}").status == 200
    assert_4xx(caller.call("GET", "/v1/jobs", query=f"cursor={by_status}"), 400, "cursor")
    assert_4xx(caller.call("GET", "/v1/jobs", query=f"status=queued&cursor={plain}"), 400, "cursor")
    assert_4xx(
        caller.call("GET", "/v1/jobs", query=f"status=running&cursor={by_status}"), 400, "cursor"
    )


# --- sizes ----------------------------------------------------------------------------------
def test_160kb_of_non_ascii_text_is_stored_as_utf8(caller: ApiCaller, api_env: Provisioned) -> None:
    text = "é漢" * 32_000  # 160 KB of UTF-8; escaped \\uXXXX it would be 384 KB
    raw = json.dumps({**JOB, "inputs": {"text": text}}, ensure_ascii=False).encode()
    assert 150_000 < len(raw) < 170_000
    resp = caller.call("POST", "/v1/jobs", raw_body=raw, headers={"Content-Type": "text/plain"})
    assert resp.status == 202, resp.body
    job_id = resp.body["job_id"]
    assert caller.get_job(job_id).body["request"]["inputs"]["text"] == text
    item = boto3.client("dynamodb").get_item(
        TableName=api_env.jobs_table,
        Key={"pk": {"S": tenant_pk("tenant-h")}, "sk": {"S": job_sk(job_id)}},
    )["Item"]
    assert len(item["request"]["S"].encode()) < 170_000  # UTF-8, not escaped


def test_request_whose_record_would_not_fit_is_413(caller: ApiCaller) -> None:
    # Under the 256 KB body limit, but its record (each step with its defaults filled in)
    # would leave no room for the attempts, errors and artifacts a job record must keep.
    steps = [{"action": "extract", "name": f"f{n}", "selector": "h1"} for n in range(500)]
    request = {"steps": steps, "inputs": {"text": "漢" * 70_000}}
    raw = json.dumps(request, ensure_ascii=False).encode()
    assert len(raw) < 256 * 1024
    resp = caller.call("POST", "/v1/jobs", raw_body=raw)
    assert_4xx(resp, 413, "body", "record")
    assert resp.error["code"] == "request_too_large"


def test_body_over_the_limit_is_413_even_base64_encoded(caller: ApiCaller) -> None:
    raw = b"\xff" * 300_000
    resp = caller.call("POST", "/v1/jobs", raw_body=raw)
    assert_4xx(resp, 413, "body", "exceeds")


# --- headers --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Idempotency-Key", "k" * 256),
        ("X-Correlation-Id", "has spaces and \u00e9"),
        ("X-Correlation-Id", "c" * 129),
    ],
)
def test_bad_headers_are_4xx_naming_the_header(caller: ApiCaller, header: str, value: str) -> None:
    resp = caller.post_job(JOB, headers={header: value})
    assert resp.status == 422, resp.body
    assert resp.error["field"].lower() == header.lower()


def test_redrive_refs_are_checked_before_any_read(api_env: Provisioned) -> None:
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "ops", admin=True)
    admin = ApiCaller(key)
    for ref in ("a/" + "b" * 2000, "/x", "t/", "t/UPPER", "\u00e9/abc"):
        resp = admin.call("POST", "/v1/admin/dead-letters/redrive", {"jobs": [ref]})
        assert_4xx(resp, 400, "jobs[0]")


# --- the catch-all --------------------------------------------------------------------------
def test_an_unexpected_fault_is_a_500_without_retry_advice(
    caller: ApiCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    from functions.api import app as api_app

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a bug of ours")

    monkeypatch.setattr(api_app.services().store, "get", broken)
    resp = caller.get_job("01jzzzzzzzzzzzzzzzzzzzzzzz")
    assert resp.status == 500
    assert resp.error["code"] == "internal_error"
    assert "retry" not in resp.error["message"]
    assert "request id" in resp.error["message"]
    assert "a bug of ours" not in json.dumps(resp.body)


def test_aws_briefly_unavailable_is_a_503_to_retry(
    caller: ApiCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError

    from functions.api import app as api_app

    def throttled(*args: Any, **kwargs: Any) -> Any:
        error = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
        raise ClientError(error, "GetItem")  # type: ignore[arg-type]

    monkeypatch.setattr(api_app.services().store, "get", throttled)
    resp = caller.get_job("01jzzzzzzzzzzzzzzzzzzzzzzz")
    assert resp.status == 503
    assert resp.headers.get("Retry-After") == "1"
    assert "retry" in resp.error["message"]
