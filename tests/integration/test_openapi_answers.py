"""Every route's success answer matches the OpenAPI document (docs/openapi.json), checked by
an independent validator (openapi-core): each route is called with a valid body and a real
id, through the real authorizer and API handlers on the session's moto server. A job in
review, a job waiting for a person, a running job and a browser session's answered command
are written as the worker writes them.

Error answers of every route are checked on the local stack by
tests/e2e/test_gateway_routes.py::test_every_routes_answers_match_the_openapi_document.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.breakers import DomainBreakers
from pagefleet.adapters.dynamodb.session_commands import DynamoCommandLedger
from pagefleet.browsing.models import Answer, PartRef
from pagefleet.jobs.human import HumanWait
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.moves import Outcome
from pagefleet.jobs.record import Artifact
from pagefleet.jobs.replay import HAR_ARTIFACT
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.targets.breakers import BreakerPolicy
from pagefleet.tenancy.api_keys import create_api_key
from pagefleet.tenancy.sessions import SessionArchive
from tests.support.api import gateway_transport
from tests.support.openapi import document, validator
from tests.support.review import stop_in_review

TENANT = "conformance"
SITE = "http://127.0.0.1:9"
JOB = {"steps": [{"action": "goto", "url": f"{SITE}/"}]}
STEPS = [{"action": "goto", "url": "{{inputs.site}}/"}]
OWNER = "worker/1"


@pytest.fixture
def http(api_env: Provisioned, monkeypatch: pytest.MonkeyPatch) -> Iterator[httpx.Client]:
    """A client of the API with an admin key of ``TENANT`` (admin: every route answers it),
    live updates on as a deployment with the WebSocket API has them."""
    monkeypatch.setenv("PAGEFLEET_CONNECTIONS_TABLE", api_env.connections_table)
    monkeypatch.setenv("PAGEFLEET_LIVE_URL", "wss://live.example.test/live")
    RUNTIME.reset()
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), TENANT, admin=True)
    with httpx.Client(
        base_url="http://gateway.test",
        transport=gateway_transport(),
        headers={"Authorization": f"Bearer {key}"},
    ) as client:
        yield client


def _drain_queue(env: Provisioned) -> None:
    """Take the queued messages as a worker would, so the jobs can be moved by hand."""
    sqs = boto3.client("sqs")
    queue = env.queue_urls["standard"]
    while messages := sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0
    ).get("Messages"):
        for message in messages:
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])


def _claim(svc: JobServices, job_id: str) -> Any:
    return svc.store.claim(
        TENANT, job_id, owner=OWNER, lease_until=2**31, now=0, started_at=iso(utcnow())
    )


def test_every_routes_success_answer_matches_the_openapi_document(
    api_env: Provisioned, svc: JobServices, http: httpx.Client
) -> None:
    spec = document()
    validate = validator(spec)
    answered: list[tuple[str, str, httpx.Response]] = []

    def call(method: str, path: str, status: int, **kwargs: Any) -> Any:
        response = http.request(method, path, **kwargs)
        assert response.status_code == status, (method, path, response.text)
        answered.append((method, path, response))
        return response.json() if response.content else None

    def submit() -> str:
        return str(call("POST", "/v1/jobs", 202, json=JOB)["job_id"])

    # Jobs: one queued, one in review, one waiting for a person, one running, one to delete,
    # one failed with its recorded traffic (to replay).
    queued, review, waiting, running, deleted, recorded = (submit() for _ in range(6))
    _drain_queue(api_env)
    har = Artifact(
        name=HAR_ARTIFACT,
        key=f"{TENANT}/{recorded}/har.zip",
        size=1,
        content_type="x",
        sha256="0" * 64,
    )
    failed = Outcome(JobStatus.FAILED, artifacts=[har])
    svc.lifecycle.finish(_claim(svc, recorded), failed, OWNER)
    stop_in_review(svc.store, TENANT, review, step=0, label="Pay", owner=OWNER)
    parked = _claim(svc, waiting)
    wait = HumanWait(prompt="solve it", step_index=0, asked_at=iso(utcnow()), timeout_at=2**31)
    svc.store.park(
        TENANT, waiting, attempt=parked.attempt, owner=OWNER, wait=wait, at=wait.asked_at
    )
    _claim(svc, running)
    # A breaker on the jobs' origin: the domain's view exists once a job there ended.
    policy = BreakerPolicy(window_s=60, min_requests=4, failure_rate=0.5, cooldown_s=30)
    DomainBreakers(RUNTIME.client("dynamodb"), api_env.jobs_table, policy).record(
        f"{SITE}", tenant=TENANT, ok=True, now=int(time.time())
    )
    SessionArchive(RUNTIME.client("s3"), api_env.artifacts_bucket).save(
        TENANT, "shop", {"cookies": []}, ttl_s=3600, now=time.time()
    )

    call("GET", "/v1/jobs", 200)
    call("POST", "/v1/jobs/validate", 200, json=JOB)
    call("POST", "/v1/batches", 200, json={"jobs": [{"job": JOB, "idempotency_key": "b-1"}]})
    for route in ("", "/artifacts", "/usage", "/events", "/deliveries"):
        call("GET", f"/v1/jobs/{queued}{route}", 200)
    call("POST", f"/v1/jobs/{review}/resolve", 200, json={"outcome": "done"})
    call("POST", f"/v1/jobs/{waiting}/continue", 200, json={"note": "solved"})
    held = call("POST", f"/v1/jobs/{running}/takeover", 200)["takeover"]["takeover_id"]
    typed = {
        "takeover_id": held,
        "frame": {"width": 96, "height": 64},
        "events": [{"type": "click", "x": 10, "y": 10}, {"type": "text", "text": "hi"}],
    }
    call("POST", f"/v1/jobs/{running}/takeover/input", 202, json=typed)
    call("DELETE", f"/v1/jobs/{running}/takeover", 200)
    call("POST", f"/v1/jobs/{running}/cancel", 202)  # running: it stops within seconds
    call("POST", f"/v1/jobs/{queued}/cancel", 200)
    call("POST", f"/v1/jobs/{recorded}/replay", 202, json={"offline": True})
    call("DELETE", f"/v1/jobs/{deleted}", 200)
    again = {"json": JOB, "headers": {"Idempotency-Key": "same"}}
    call("POST", "/v1/jobs", 202, **again)
    call("POST", "/v1/jobs", 202, **again)  # replayed: the first answer

    definition = {"steps": STEPS, "inputs": {"site": SITE}}
    call("PUT", "/v1/workflows/shop", 201, json=definition)
    call("PUT", "/v1/workflows/shop", 201, json={**definition, "inputs": {"site": SITE + "0"}})
    call("GET", "/v1/workflows", 200)
    call("GET", "/v1/workflows/shop", 200)
    call("GET", "/v1/workflows/shop/versions/1", 200)
    call("GET", "/v1/workflows/shop/diff", 200, params={"from": 1, "to": 2})

    schedule = {"name": "nightly", "expression": "rate(1 day)", "job": JOB}
    sid = call("POST", "/v1/schedules", 201, json=schedule)["schedule_id"]
    call("GET", "/v1/schedules", 200)
    call("GET", f"/v1/schedules/{sid}", 200)
    call("POST", f"/v1/schedules/{sid}/run", 202)
    call("GET", f"/v1/schedules/{sid}/runs", 200)
    call("PUT", f"/v1/schedules/{sid}/baseline", 200, json={"job_id": None})
    call("PATCH", f"/v1/schedules/{sid}", 200, json={"enabled": False})
    call("DELETE", f"/v1/schedules/{sid}", 204)

    session = call("POST", "/v1/browser-sessions", 201, json={})["session_id"]
    base = f"/v1/browser-sessions/{session}"
    step = {"step": {"action": "goto", "url": f"{SITE}/"}, "wait_s": 0, "command_id": "go-1"}
    call("POST", f"{base}/steps", 202, json=step)  # not answered yet: the command to read
    ledger = DynamoCommandLedger(RUNTIME.client("dynamodb"), api_env.jobs_table)
    assert ledger.claim(TENANT, session, "go-1", now=time.time(), order="1").verdict == "run"
    made = PartRef(
        key=f"{TENANT}/{session}/1/a.csv", sha256="0" * 64, bytes=3, content_type="text/csv"
    )
    answer = Answer(id="go-1", ran=1, files={"a.csv": made})
    ledger.finish(TENANT, session, "go-1", answer, [step["step"]])
    call("GET", f"{base}/commands/go-1", 200)
    [listed] = call("GET", f"{base}/files", 200)["files"]
    assert listed["name"] == "a.csv" and listed["expires_in"] == 300  # the links' life
    call("POST", f"{base}/steps", 200, json=step)  # sent again: the first answer
    call("GET", base, 200)
    call("GET", "/v1/browser-sessions", 200)
    call("POST", f"{base}/save-as-workflow", 201, json={"name": "from-session"})
    call("DELETE", base, 200)

    call("GET", "/v1/sessions", 200)
    call("GET", "/v1/sessions/shop", 200)
    call("DELETE", "/v1/sessions/shop", 204)
    call("GET", "/v1/domains", 200)
    call("GET", "/v1/domains/127.0.0.1", 200)
    call("GET", "/v1/live", 200)
    call("POST", "/v1/live/tickets", 201)
    call("GET", "/v1/notifications", 200)
    call("PUT", "/v1/notifications", 200, json={"webhook": None})
    call("GET", "/v1/notifications/signing-secret", 200)
    call("POST", "/v1/notifications/signing-secret/rotate", 200)
    call("GET", "/v1/tenant", 200)
    call("GET", "/v1/usage", 200)
    call("GET", "/v1/stats", 200)
    mcp = {"Accept": "application/json, text/event-stream"}
    listed = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    call("POST", "/v1/mcp", 200, json=listed, headers=mcp)
    call("GET", "/v1/health", 200)
    call("GET", "/v1/openapi.json", 200)
    call("GET", "/v1/workflow.schema.json", 200)
    call("GET", f"/v1/admin/tenants/{TENANT}", 200)
    call("PATCH", f"/v1/admin/tenants/{TENANT}/limits", 200, json={"max_running": 5})
    call("GET", "/v1/admin/usage", 200)
    call("GET", "/v1/admin/audit", 200)
    call("GET", "/v1/admin/dead-letters", 200)
    call("POST", "/v1/admin/dead-letters/redrive", 200, json={"jobs": []})

    failures = []
    for method, path, response in answered:
        try:
            validate(method, path, response)
        except Exception as exc:
            failures.append(f"{method} {path} -> {response.status_code} {response.text[:300]}")
            failures.append(f"    {exc}: {getattr(exc, '__cause__', '')}")
    assert failures == [], "\n".join(failures)

    # Every operation of the document answered here with success.
    templates = {
        (method.upper(), re.compile("/v1" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"))
        for path, operations in spec["paths"].items()
        for method in operations
    }
    unmet = {
        (m, t.pattern)
        for m, t in templates
        if not any(m == a and t.match(p.split("?")[0]) for a, p, _ in answered)
    }
    assert unmet == set()
