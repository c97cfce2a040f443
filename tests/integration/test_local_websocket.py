"""The local WebSocket API and its @connections endpoint, with API Gateway's event shapes,
then with the real live and job_changes handlers against moto (no browser)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from devstack.event_sources import StreamPoller
from devstack.gateway import LocalGateway
from devstack.provision import Provisioned
from devstack.websocket.management import ConnectionsApp
from devstack.websocket.server import LocalWebSocketApi
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.adapters.live import ApiGatewayPoster
from pagefleet.jobs.models import JobRequest, iso, utcnow
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key


class Recorder:
    """A stand-in live function: records events, answers as told."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.refuse = False

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        self.events.append(event)
        route = event["requestContext"]["routeKey"]
        if route == "$connect":
            return {"statusCode": 401, "body": '{"no": 1}'} if self.refuse else {"statusCode": 200}
        if route in ("$disconnect",):
            return {"statusCode": 200}
        return {"statusCode": 200, "body": json.dumps({"route": route, "body": event["body"]})}


@pytest.fixture
def local_api() -> Iterator[tuple[LocalWebSocketApi, LocalGateway, Recorder]]:
    recorder = Recorder()
    api = LocalWebSocketApi(recorder, idle_timeout_s=1.0, max_age_s=30).start()
    management = LocalGateway([ConnectionsApp(api)], port=0).start()
    try:
        yield api, management, recorder
    finally:
        management.stop()
        api.stop()


def poster(management: LocalGateway) -> ApiGatewayPoster:
    client = boto3.client(
        "apigatewaymanagementapi",
        endpoint_url=f"{management.url}/live",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    return ApiGatewayPoster(client)


def wait_until(check: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.02)


def test_routes_connect_and_disconnect_as_api_gateway_does(local_api: Any) -> None:
    api, management, recorder = local_api
    with connect(f"{api.url}?ticket=abc", additional_headers={"Authorization": "Bearer k"}) as ws:
        connect_event = recorder.events[0]
        assert connect_event["requestContext"]["routeKey"] == "$connect"
        assert connect_event["requestContext"]["eventType"] == "CONNECT"
        assert connect_event["queryStringParameters"] == {"ticket": "abc"}
        assert connect_event["headers"]["Authorization"] == "Bearer k"
        connection_id = connect_event["requestContext"]["connectionId"]
        ws.send(json.dumps({"action": "subscribe", "job_id": "j1"}))
        assert json.loads(ws.recv(timeout=10))["route"] == "subscribe"
        ws.send(json.dumps({"action": "nonsense"}))
        assert json.loads(ws.recv(timeout=10))["route"] == "$default"
        ws.send("not json")
        assert json.loads(ws.recv(timeout=10))["route"] == "$default"
        message = recorder.events[1]
        assert message["requestContext"]["eventType"] == "MESSAGE"
        assert message["requestContext"]["connectionId"] == connection_id
        assert message["body"] == '{"action": "subscribe", "job_id": "j1"}'
        # The management API, through boto3, as functions/live calls it.
        assert poster(management).post(connection_id, b'{"type":"pong"}')
        assert json.loads(ws.recv(timeout=10)) == {"type": "pong"}
        # Ids are base64: "/" and "+" travel URL-encoded and must still find the connection.
        odd = "ab/cd+ef=="
        api._clients[odd] = api._clients[connection_id]
        assert poster(management).post(odd, b'{"type":"odd"}')
        assert json.loads(ws.recv(timeout=10)) == {"type": "odd"}
        del api._clients[odd]
    wait_until(lambda: recorder.events[-1]["requestContext"]["routeKey"] == "$disconnect")
    assert recorder.events[-1]["requestContext"]["disconnectStatusCode"] == 1000
    assert not poster(management).post(connection_id, b"{}")  # gone: 410


def test_a_refused_connect_is_the_handlers_status(local_api: Any) -> None:
    api, _, recorder = local_api
    recorder.refuse = True
    with pytest.raises(InvalidStatus) as refused:
        connect(api.url)
    assert refused.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as wrong_stage:
        connect(api.url.replace("/live", "/other"))
    assert wrong_stage.value.response.status_code == 403


def test_the_server_closes_idle_connections_and_on_request(local_api: Any) -> None:
    api, management, recorder = local_api
    with connect(api.url) as idle:
        with pytest.raises(ConnectionClosed) as closed:
            idle.recv(timeout=20)  # says nothing for idle_timeout_s
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    with connect(api.url) as ws:
        connection_id = recorder.events[-1]["requestContext"]["connectionId"]
        poster(management).close(connection_id)
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
    poster(management).close(connection_id)  # gone already: no error


# --- with the real handlers, against moto --------------------------------------------------------
@pytest.fixture
def live_stack(
    svc: JobServices, provisioned: Provisioned, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    from functions.job_changes import handler as changes
    from functions.live import handler as live

    api = LocalWebSocketApi(lambda event: live.handler(event, None)).start()
    management = LocalGateway([ConnectionsApp(api)], port=0).start()
    for name, value in {
        "PAGEFLEET_JOBS_TABLE": provisioned.jobs_table,
        "PAGEFLEET_TENANTS_TABLE": provisioned.tenants_table,
        "PAGEFLEET_ARTIFACTS_BUCKET": provisioned.artifacts_bucket,
        "PAGEFLEET_QUEUE_URLS": json.dumps(provisioned.queue_urls),
        "PAGEFLEET_CONNECTIONS_TABLE": provisioned.connections_table,
        "PAGEFLEET_LIVE_ENDPOINT": f"{management.url}/live",
    }.items():
        monkeypatch.setenv(name, value)
    RUNTIME.reset()
    stream = StreamPoller(provisioned.jobs_table, lambda e: changes.handler(e, None)).start()
    store = RUNTIME.tenant_store(provisioned.tenants_table)
    keys = {t: create_api_key(store, t)[0] for t in ("tenant-a", "tenant-b")}
    try:
        yield {"api": api, "keys": keys, "svc": svc, "env": provisioned}
    finally:
        stream.stop()
        management.stop()
        api.stop()


def messages_until(ws: ClientConnection, done: Any, timeout: float = 30) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while not got or not done(got[-1]):
        raw = ws.recv(timeout=max(0.1, deadline - time.monotonic()))
        message = json.loads(raw)
        got += message["messages"] if message["type"] == "batch" else [message]
    return got


REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})


def test_a_follower_gets_events_and_statuses_and_another_tenant_nothing(live_stack: Any) -> None:
    api, keys, svc, env = (live_stack[k] for k in ("api", "keys", "svc", "env"))
    job = submit_job(svc, "tenant-a", REQUEST).job
    events = DynamoEventStore(RUNTIME.client("dynamodb"), env.jobs_table)
    events.put(
        "tenant-a", job.job_id, [{"seq": 1, "at": "x", "type": "log"}], expires_at=2**31, attempt=1
    )
    with (
        connect(api.url, additional_headers={"Authorization": f"Bearer {keys['tenant-a']}"}) as ws,
        connect(
            api.url, additional_headers={"Authorization": f"Bearer {keys['tenant-b']}"}
        ) as other,
    ):
        other.send(json.dumps({"action": "subscribe", "job_id": job.job_id, "after": 0}))
        assert json.loads(other.recv(timeout=10))["code"] == "not_found"
        ws.send(json.dumps({"action": "subscribe", "job_id": job.job_id, "after": 0}))
        first = messages_until(ws, lambda m: m["type"] == "status")
        assert [m["type"] for m in first] == ["events", "status"]  # catch-up, then status
        assert first[0]["events"][0]["seq"] == 1 and first[1]["status"] == "queued"
        events.put(
            "tenant-a",
            job.job_id,
            [{"seq": 2, "at": "y", "type": "log"}],
            expires_at=2**31,
            attempt=1,
        )
        svc.store.transition("tenant-a", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
        rest = messages_until(ws, lambda m: m.get("status") == "cancelled")
        # Event 1 may come again from the stream (it was caught up already): keep the highest.
        seqs = [e["seq"] for m in rest if m["type"] == "events" for e in m["events"]]
        assert [s for s in seqs if s > 1] == [2] and set(seqs) <= {1, 2}
        final = rest[-1]
        assert final["final"] is True
        # Sent by the invocation that read the change (stamps of the system, not the test).
        assert final["sent_at"] >= final["written_at"]
        other.send(json.dumps({"action": "ping"}))
        assert json.loads(other.recv(timeout=10)) == {"type": "pong"}  # nothing came before
