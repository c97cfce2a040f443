"""Every route the API's resolver serves works through the local gateway, over HTTP.

The routes come from the resolver itself (its OpenAPI description), so a route added
later is walked too. The local stack runs without workers: nothing here needs Chromium.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from devstack.stack import DEV_TENANT, LocalStack
from pagefleet.client import PagefleetClient
from pagefleet.specs.gateway import PUBLIC_ROUTES
from pagefleet.specs.resources import API_STAGE, DEFAULT_POOL
from tests.e2e.conftest import running
from tests.support.openapi import document, validator

pytestmark = [pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
# Known admin-only routes; every route under /v1/admin/ must be admin-only too.
ADMIN_ROUTES = {("GET", "/v1/domains"), ("GET", "/v1/admin/dead-letters")}
SIMPLE_JOB = {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}


def resolver_routes() -> list[tuple[str, str]]:
    """(METHOD, URL path template) for every route of ``functions.api.app``: the resolver's
    route after the stage (the version, ``/v1``), as clients call it."""
    from functions.api.app import app

    schema = app.get_openapi_schema()
    return sorted(
        (method.upper(), f"/{API_STAGE}{path}")
        for path, item in schema.paths.items()
        for method in METHODS
        if getattr(item, method, None) is not None
    )


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    yield from running(LocalStack(api_port=0, workers=0))


@pytest.fixture(scope="module")
def admin_key(stack: LocalStack) -> str:
    # Same tenant as the dev key: the two keys differ only in the admin right.
    return stack.create_tenant_key(DEV_TENANT, name="ops", admin=True)


def _call(stack: LocalStack, key: str, method: str, path: str) -> httpx.Response:
    with httpx.Client(base_url=stack.api_url, trust_env=False, timeout=60) as http:
        return http.request(
            method,
            path,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            content=b"{}" if method in ("POST", "PUT", "PATCH") else None,
        )


def _error_code(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return None
    return (body.get("error") or {}).get("code") if isinstance(body, dict) else None


def test_every_resolver_route_answers_through_the_gateway(
    stack: LocalStack, admin_key: str
) -> None:
    routes = resolver_routes()
    assert ADMIN_ROUTES <= set(routes), "the known admin routes are not in the resolver"
    with stack.client() as client:
        job_id = client.submit(SIMPLE_JOB).job_id
    values = {"job_id": job_id, "domain": "example.com"}

    answers: dict[tuple[str, str], dict[str, httpx.Response]] = {}
    for method, template in routes:
        path = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "x"), template)
        answers[(method, template)] = {
            who: _call(stack, key, method, path)
            for who, key in (("tenant", stack.dev_api_key or ""), ("admin", admin_key))
        }

    for route, by_key in answers.items():
        for who, response in by_key.items():
            seen = f"{route} as {who}: {response.status_code} {response.text[:200]}"
            # A 204 (a deletion) has no body; API Gateway's own refusal always has one.
            body = response.json() if response.content else None
            error = body.get("error") if isinstance(body, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            assert message != "Missing Authentication Token", seen
            assert response.status_code < 500, seen
            assert _error_code(response) != "route_not_found", seen
    admin_only = {
        route
        for route, by_key in answers.items()
        if by_key["tenant"].status_code == 403 and _error_code(by_key["tenant"]) == "forbidden"
    }
    assert ADMIN_ROUTES <= admin_only
    assert {r for r in answers if r[1].startswith("/v1/admin/")} <= admin_only
    for route in admin_only:
        response = answers[route]["admin"]
        # Past the admin check: served, or (the walk sends {}) told what the body lacks.
        refused_body = _error_code(response) in ("invalid_request", "validation_error")
        assert 200 <= response.status_code < 300 or refused_body, f"{route}: {response.text[:200]}"


def _cli(*args: str, key: str, stack: LocalStack) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pagefleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={
            **os.environ,
            "PAGEFLEET_API_URL": stack.api_url,
            "PAGEFLEET_API_KEY": key,
            "COLUMNS": "200",
        },
        check=False,
    )


def _dead_letter(stack: LocalStack, client: PagefleetClient) -> str:
    """A queued job whose message lands in the DLQ, as SQS redrive does after
    maxReceiveCount; the stack's DLQ poller marks it dead-lettered."""
    assert stack.provisioned is not None
    sqs = boto3.client("sqs", endpoint_url=stack.aws_endpoint)
    job_id = client.submit(SIMPLE_JOB).job_id
    queue = stack.provisioned.queue_urls[DEFAULT_POOL]
    deadline = time.monotonic() + 60
    while True:
        messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
        mine = [m for m in messages if json.loads(m["Body"]).get("job_id") == job_id]
        if mine:
            break
        assert time.monotonic() < deadline, "the job's message never showed up"
    sqs.send_message(QueueUrl=stack.provisioned.dlq_urls[DEFAULT_POOL], MessageBody=mine[0]["Body"])
    while client.get(job_id).status.value != "dead_lettered":
        assert time.monotonic() < deadline + 60, "the DLQ poller never marked the job"
        time.sleep(0.2)
    return job_id


def test_cli_lists_and_redrives_dead_letters_with_an_admin_key(
    stack: LocalStack, admin_key: str
) -> None:
    with stack.client() as client:
        job_id = _dead_letter(stack, client)

        listed = _cli("dead-letters", key=admin_key, stack=stack)
        refused = _cli("dead-letters", key=stack.dev_api_key or "", stack=stack)
        redriven = _cli("dead-letters", "--redrive", key=admin_key, stack=stack)
        after = client.get(job_id)

    assert listed.returncode == 0, listed.stderr
    assert job_id in listed.stdout
    assert refused.returncode == 2 and "403" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert redriven.returncode == 0, redriven.stderr
    assert re.search(r"redriven: [1-9]\d* job", redriven.stdout)
    assert after.status.value == "queued"


def test_a_submitted_job_is_at_the_location_it_was_given(stack: LocalStack) -> None:
    """The Location header resolves on the URL the client used (the deployed shape:
    <base>/v1/...), so following it finds the job."""
    with httpx.Client(base_url=stack.api_url, trust_env=False, timeout=60) as http:
        auth = {"Authorization": f"Bearer {stack.dev_api_key}"}
        made = http.post("/v1/jobs", json=SIMPLE_JOB, headers=auth)
        assert made.status_code == 202
        location = made.headers["Location"]
        assert location == f"/v1/jobs/{made.json()['job_id']}"
        found = http.get(location, headers=auth)
        assert found.status_code == 200 and found.json()["job_id"] == made.json()["job_id"]
        # Outside the stage there is nothing: API Gateway's 403, before any function runs.
        assert http.get(location.removeprefix("/v1"), headers=auth).status_code == 403


def test_every_routes_answers_match_the_openapi_document(stack: LocalStack, admin_key: str) -> None:
    validate = validator(document())
    with stack.client() as client:
        job_id = client.submit(SIMPLE_JOB).job_id
    values = {"job_id": job_id, "domain": "example.com"}
    seen: list[tuple[str, str, httpx.Response]] = []
    with httpx.Client(base_url=stack.api_url, trust_env=False, timeout=60) as http:
        for method, template in resolver_routes():
            path = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "x"), template)
            for key in (stack.dev_api_key or "", admin_key, ""):
                # The walk's answers (served, or refused for the {} body or the id "x"), and
                # without a key: API Gateway's own 401, through the gateway response.
                headers = {"Authorization": f"Bearer {key}"} if key else {}
                body = b"{}" if method in ("POST", "PUT", "PATCH") else None
                seen.append(
                    (method, path, http.request(method, path, headers=headers, content=body))
                )
        auth = {"Authorization": f"Bearer {stack.dev_api_key}"}
        made = http.post(
            "/v1/schedules",
            headers=auth,
            json={"name": "conformance", "expression": "rate(1 day)", "job": SIMPLE_JOB},
        )
        assert made.status_code == 201, made.text
        deleted = f"/v1/schedules/{made.json()['schedule_id']}"
        seen += [
            ("POST", "/v1/schedules", made),
            ("DELETE", deleted, http.delete(deleted, headers=auth)),
            ("DELETE", "/v1/sessions/none", http.delete("/v1/sessions/none", headers=auth)),
            ("GET", "/v1/jobs/" + job_id, http.get(f"/v1/jobs/{job_id}", headers=auth)),
            ("GET", "/v1/openapi.json", http.get("/v1/openapi.json")),  # no key
        ]
    failures = []
    for method, path, response in seen:
        try:
            validate(method, path, response)
        except Exception as exc:
            failures.append(
                f"{method} {path} -> {response.status_code} {response.text[:160]}: {exc}"
            )
    assert not failures, "\n".join(failures)
    by_status = {(m, p): r.status_code for m, p, r in seen[-5:]}
    assert by_status[("DELETE", deleted)] == 204
    assert by_status[("DELETE", "/v1/sessions/none")] == 204
    assert by_status[("GET", "/v1/openapi.json")] == 200
    keyless = seen[:-5][2::3]
    for method, path, response in keyless:
        if (method, path.removeprefix("/v1")) not in PUBLIC_ROUTES:
            assert response.status_code == 401, (method, path, response.text)
            assert response.json()["error"]["code"] == "unauthorized", (method, path)


def test_health_answers_without_a_key_with_the_release_and_stage(stack: LocalStack) -> None:
    import pagefleet

    with PagefleetClient(stack.api_url, None) as keyless:
        health = keyless.health()
    assert (health.status, health.version) == ("ok", pagefleet.__version__)
    assert health.stage == "local"  # the local stack's stage (devstack/local_settings.py)
    with httpx.Client(base_url=stack.api_url, trust_env=False, timeout=60) as http:
        # Its resource has only GET: anything else is API Gateway's own refusal.
        refused = http.post("/v1/health", content=b"{}")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "route_not_found"
