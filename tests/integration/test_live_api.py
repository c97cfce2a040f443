"""Live and notification routes through the real authorizer and API handler, against moto."""

from __future__ import annotations

import time
from typing import Any

import pytest
from typer.testing import CliRunner

from devstack.provision import Provisioned
from devstack.websocket.events import connect_event
from pagefleet import cli
from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.adapters.notify import signing_secret_id
from pagefleet.notify.ports import DeliveryAttempt
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import ApiCaller, caller

JOB = {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}


@pytest.fixture
def live_env(api_env: Provisioned, monkeypatch: pytest.MonkeyPatch) -> Provisioned:
    monkeypatch.setenv("PAGEFLEET_CONNECTIONS_TABLE", api_env.connections_table)
    monkeypatch.setenv("PAGEFLEET_LIVE_URL", "wss://live.example.test/live")
    RUNTIME.reset()
    return api_env


def _caller(env: Provisioned, tenant: str) -> ApiCaller:
    return ApiCaller(create_api_key(RUNTIME.tenant_store(env.tenants_table), tenant)[0])


def _submit(caller: ApiCaller, body: dict[str, Any] | None = None) -> str:
    resp = caller.call("POST", "/v1/jobs", body or JOB)
    assert resp.status == 202, resp.body
    return str(resp.body["job_id"])


def _event(seq: int) -> dict[str, Any]:
    return {"seq": seq, "at": "2027-01-15T08:00:00.000Z", "type": "log", "message": f"#{seq}"}


def test_events_are_listed_in_order_and_only_to_their_tenant(live_env: Provisioned) -> None:
    a, b = _caller(live_env, "tenant-a"), _caller(live_env, "tenant-b")
    job_id = _submit(a)
    store = DynamoEventStore(RUNTIME.client("dynamodb"), live_env.jobs_table)
    later = int(time.time()) + 3600
    store.put("tenant-a", job_id, [_event(s) for s in range(1, 4)], expires_at=later, attempt=1)
    store.put("tenant-a", job_id, [_event(s) for s in range(4, 8)], expires_at=later, attempt=1)

    page = a.call("GET", f"/v1/jobs/{job_id}/events")
    assert page.status == 200
    assert [e["seq"] for e in page.body["events"]] == list(range(1, 8))
    assert page.body["events"][0] == _event(1)  # unset fields left out
    assert (page.body["next_after"], page.body["more"]) == (7, False)

    page = a.call("GET", f"/v1/jobs/{job_id}/events", query="after=2&limit=3")
    assert [e["seq"] for e in page.body["events"]] == [3, 4, 5]
    assert (page.body["next_after"], page.body["more"]) == (5, True)
    page = a.call("GET", f"/v1/jobs/{job_id}/events", query="after=7")
    assert (page.body["events"], page.body["next_after"], page.body["more"]) == ([], 7, False)

    other = b.call("GET", f"/v1/jobs/{job_id}/events")
    assert other.status == 404 and other.error["code"] == "not_found"
    assert a.call("GET", f"/v1/jobs/{'0' * 26}/events").status == 404
    assert a.call("GET", f"/v1/jobs/{job_id}/events", query="limit=0").status == 422


def test_expired_events_are_gone_from_the_listing(live_env: Provisioned) -> None:
    a = _caller(live_env, "tenant-a")
    job_id = _submit(a)
    store = DynamoEventStore(RUNTIME.client("dynamodb"), live_env.jobs_table)
    store.put("tenant-a", job_id, [_event(1)], expires_at=int(time.time()) - 1, attempt=1)
    store.put("tenant-a", job_id, [_event(2)], expires_at=int(time.time()) + 3600, attempt=1)
    page = a.call("GET", f"/v1/jobs/{job_id}/events")
    assert [e["seq"] for e in page.body["events"]] == [2]


def test_deliveries_are_listed_to_their_tenant_only(live_env: Provisioned) -> None:
    a, b = _caller(live_env, "tenant-a"), _caller(live_env, "tenant-b")
    job_id = _submit(a)
    deliveries = DynamoDeliveries(RUNTIME.client("dynamodb"), live_env.jobs_table)
    for n, status in ((1, "failed"), (2, "delivered")):
        deliveries.record(
            "tenant-a",
            job_id,
            DeliveryAttempt(
                delivery_id="dlv_x",
                attempt=n,
                at=f"2027-01-15T08:00:0{n}.000Z",
                url="https://hooks.example.com/pf",
                status=status,
                status_code=500 if n == 1 else 204,
            ),
            expires_at=int(time.time()) + 3600,
        )
    listed = a.call("GET", f"/v1/jobs/{job_id}/deliveries")
    assert listed.status == 200
    assert [(d["attempt"], d["status"], d["status_code"]) for d in listed.body["deliveries"]] == [
        (1, "failed", 500),
        (2, "delivered", 204),
    ]
    assert b.call("GET", f"/v1/jobs/{job_id}/deliveries").status == 404


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://metadata.google.internal/hook",
        "http://10.0.0.7/hook",
        "http://[::ffff:127.0.0.1]:8080/hook",  # loopback, not allowed outside local mode
        "http://localhost:8080/hook",  # resolves to loopback
        "http://2130706433/hook",  # 127.0.0.1 spelled as a number
        "https://unresolvable.example/hook",
    ],
)
def test_a_webhook_the_egress_policy_refuses_is_refused_at_submit(
    live_env: Provisioned, url: str
) -> None:
    a = _caller(live_env, "tenant-a")
    resp = a.call("POST", "/v1/jobs", {**JOB, "notify": {"webhook": url}})
    assert resp.status == 422, resp.body
    assert resp.error["field"] == "notify.webhook"
    put = a.call("PUT", "/v1/notifications", {"webhook": url})
    assert put.status == 422 and put.error["field"] == "webhook"


@pytest.mark.parametrize(
    "host", ["127.0.0.1%2e", "%31%32%37.0.0.1", "foo.localhost", "a..example.com", "db.internal"]
)
def test_a_webhook_host_that_cannot_be_right_is_refused_unresolved(
    live_env: Provisioned, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    from pagefleet.targets import egress_policy

    asked: list[str] = []

    def lookup(name: str) -> list[str]:
        asked.append(name)
        return ["93.184.216.34"]

    monkeypatch.setattr(egress_policy, "system_lookup", lookup)
    a = _caller(live_env, "tenant-a")
    url = f"http://{host}/hook"
    resp = a.call("POST", "/v1/jobs", {**JOB, "notify": {"webhook": url}})
    assert resp.status == 422 and resp.error["field"] == "notify.webhook", resp.body
    put = a.call("PUT", "/v1/notifications", {"webhook": url})
    assert put.status == 422 and put.error["field"] == "webhook"
    assert asked == []


def test_malformed_webhooks_are_422(live_env: Provisioned) -> None:
    a = _caller(live_env, "tenant-a")
    for url in ("ftp://x/", "https://user:pw@hooks.example.com/", "not a url", "http:///x"):
        resp = a.call("POST", "/v1/jobs", {**JOB, "notify": {"webhook": url}})
        assert resp.status == 422 and resp.error["field"] == "notify.webhook", (url, resp.body)


def test_loopback_webhooks_only_in_local_mode(
    live_env: Provisioned, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAGEFLEET_ALLOW_LOOPBACK", "true")
    RUNTIME.reset()
    a = _caller(live_env, "tenant-a")
    job = a.call("POST", "/v1/jobs", {**JOB, "notify": {"webhook": "http://127.0.0.1:9/h"}})
    assert job.status == 202
    assert job.body["job"]["request"]["notify"] == {
        "webhook": "http://127.0.0.1:9/h",
        "on": ["finished"],  # the default, filled in like every default of the request
    }
    # Still never private or metadata addresses.
    private = a.call("POST", "/v1/jobs", {**JOB, "notify": {"webhook": "http://10.1.1.1/"}})
    assert private.status == 422


def test_the_tenant_default_webhook(live_env: Provisioned) -> None:
    a, b = _caller(live_env, "tenant-a"), _caller(live_env, "tenant-b")
    assert a.call("GET", "/v1/notifications").body == {"webhook": None}
    put = a.call("PUT", "/v1/notifications", {"webhook": "https://93.184.216.34/pf"})
    assert put.status == 200 and put.body == {"webhook": "https://93.184.216.34/pf"}
    assert a.call("GET", "/v1/notifications").body == {"webhook": "https://93.184.216.34/pf"}
    assert b.call("GET", "/v1/notifications").body == {"webhook": None}
    assert a.call("PUT", "/v1/notifications", {"webhook": None}).status == 200
    assert a.call("GET", "/v1/notifications").body == {"webhook": None}


def test_the_signing_secret_is_the_tenants_own(live_env: Provisioned) -> None:
    a, b = _caller(live_env, "tenant-a"), _caller(live_env, "tenant-b")
    first = a.call("GET", "/v1/notifications/signing-secret").body["secret"]
    assert a.call("GET", "/v1/notifications/signing-secret").body["secret"] == first
    assert b.call("GET", "/v1/notifications/signing-secret").body["secret"] != first
    stored = RUNTIME.client("secretsmanager").get_secret_value(
        SecretId=signing_secret_id("dev", "tenant-a")
    )
    assert stored["SecretString"] == first
    rotated = a.call("POST", "/v1/notifications/signing-secret/rotate").body["secret"]
    assert rotated != first
    assert a.call("GET", "/v1/notifications/signing-secret").body["secret"] == rotated


def test_tickets_and_the_live_address(live_env: Provisioned) -> None:
    a = _caller(live_env, "tenant-a")
    info = a.call("GET", "/v1/live").body
    assert info["url"] == "wss://live.example.test/live"
    assert (info["idle_timeout_s"], info["max_age_s"]) == (600, 7200)
    resp = a.call("POST", "/v1/live/tickets")
    assert resp.status == 201
    ticket = resp.body["ticket"]
    assert ticket.startswith("lt_") and resp.body["expires_in"] == 60
    assert resp.body["url"] == f"wss://live.example.test/live?ticket={ticket}"
    assert a.call("POST", "/v1/live/tickets").body["ticket"] != ticket
    assert ApiCaller(None).call("POST", "/v1/live/tickets").status == 401


def test_a_ticket_connects_a_tenant_an_admin_changed(
    live_env: Provisioned, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: once an admin changed a tenant's limits (an audit record naming the tenant),
    its tickets answered 500 and ``pagefleet admin list-keys`` crashed."""
    from functions.live import handler as live

    monkeypatch.setenv("PAGEFLEET_LIVE_ENDPOINT", "http://127.0.0.1:9/live")  # never posted to

    admin = caller(live_env, "ops", admin=True)
    patched = admin.call("PATCH", "/v1/admin/tenants/tenant-a/limits", {"max_running": 3})
    assert patched.status == 200, patched.body
    key, record = create_api_key(RUNTIME.tenant_store(live_env.tenants_table), "tenant-a")
    ticket = ApiCaller(key).call("POST", "/v1/live/tickets").body["ticket"]

    event = connect_event(
        "conn-1",
        headers=[],
        query={"ticket": [ticket]},
        api_id="live",
        stage="live",
        domain="live.example.test",
        connected_at_ms=int(time.time() * 1000),
        source_ip="127.0.0.1",
        user_agent=None,
    )
    assert live.handler(event, None)["statusCode"] == 200

    listed = CliRunner().invoke(
        cli.app,
        ["admin", "list-keys", "--tenant", "tenant-a"],
        env={"PAGEFLEET_TENANTS_TABLE": live_env.tenants_table, "COLUMNS": "200"},
    )
    assert listed.exit_code == 0, listed.output
    assert record.key_id in listed.output


def test_no_tickets_where_live_is_not_deployed(api_env: Provisioned) -> None:
    a = _caller(api_env, "tenant-a")
    assert a.call("POST", "/v1/live/tickets").status == 404
    assert a.call("GET", "/v1/live").body["url"] is None


def test_the_operators_signing_secret_command_names_its_stage_and_never_mints_one(
    live_env: Provisioned,
) -> None:
    """On prod, a read that created a missing secret would sign with one no tenant has."""
    runner = CliRunner()
    command = ["admin", "signing-secret", "--tenant", "tenant-a"]
    without_stage = runner.invoke(cli.app, command, env={"PAGEFLEET_STAGE": None})
    assert without_stage.exit_code == 2 and "--stage" in without_stage.output
    missing = runner.invoke(cli.app, [*command, "--stage", "dev"])
    assert missing.exit_code == 1
    assert "no signing secret for tenant 'tenant-a' on stage 'dev'" in missing.output
    secrets = RUNTIME.client("secretsmanager")
    with pytest.raises(secrets.exceptions.ResourceNotFoundException):  # the read made none
        secrets.get_secret_value(SecretId=signing_secret_id("dev", "tenant-a"))
    handed_out = _caller(live_env, "tenant-a").call("GET", "/v1/notifications/signing-secret")
    shown = runner.invoke(cli.app, [*command, "--stage", "dev"])
    assert shown.exit_code == 0 and shown.stdout.strip() == handed_out.body["secret"]
    other_stage = runner.invoke(cli.app, [*command, "--stage", "prod"])
    assert other_stage.exit_code == 1  # another stage's tenant of the same name has none
