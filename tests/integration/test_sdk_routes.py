"""The SDK page's route column is what each client method really calls: every public method
of ``PagefleetClient`` is called through the real authorizer and API handlers (the session's
moto server), its requests are recorded, and each must be a route the page names for it.

The page reads the routes from the client's code (scripts/docs_pages/sdk_page.py); this
records them from the wire, so neither can drift from the other unnoticed.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.provision import Provisioned
from pagefleet.browsing.models import StepsAnswer
from pagefleet.client import ApiError, ArtifactLink, PagefleetClient
from pagefleet.client import follow_async as follow_async_module
from pagefleet.client.browsing import CommandPending
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import gateway_transport

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from docs_pages.sdk_page import client_routes, public_methods

API = "gateway.test"
STORAGE = "http://storage.test/part"  # a presigned link's place: not the API
JOB = {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}
SCHEDULE = {"name": "routes", "expression": "rate(1 day)", "job": JOB}

Call = Callable[[PagefleetClient, dict[str, Any]], Any]

# One call of each public method; ``ids`` holds what the calls before it made. A method
# added to the client fails the test until it has its call here.
CALLS: dict[str, Call] = {
    "submit": lambda c, ids: ids.update(job=c.submit(JOB).job_id, other=c.submit(JOB).job_id),
    "validate": lambda c, ids: c.validate(JOB),
    "get": lambda c, ids: ids.update(view=c.get(ids["job"])),
    "list": lambda c, ids: c.list(limit=1),
    "iter_jobs": lambda c, ids: next(c.iter_jobs(page_size=1)),
    "wait": lambda c, ids: c.wait(ids["job"], timeout=0),
    "workflow_schema": lambda c, ids: c.workflow_schema(),
    "health": lambda c, ids: c.health(),
    "events": lambda c, ids: c.events(ids["job"]),
    "artifacts": lambda c, ids: c.artifacts(ids["job"]),
    "deliveries": lambda c, ids: c.deliveries(ids["job"]),
    "job_usage": lambda c, ids: c.job_usage(ids["job"]),
    "changes": lambda c, ids: c.changes(ids["job"]),
    # A result too large for the record: read from its artifact (here, none).
    "result": lambda c, ids: c.result(ids["view"].model_copy(update={"result_artifact": "r"})),
    "resolve": lambda c, ids: c.resolve(ids["job"], "done"),
    "continue_job": lambda c, ids: c.continue_job(ids["job"], note="done"),
    "cancel": lambda c, ids: c.cancel(ids["job"]),
    "replay": lambda c, ids: c.replay(ids["job"]),  # refused (no HAR): the route is made
    "follow": lambda c, ids: list(c.follow(ids["job"], timeout=30, poll_s=0.01)),
    "follow_async": lambda c, ids: _drain(c.follow_async(ids["job"], timeout=30, poll_s=0.01)),
    "delete": lambda c, ids: c.delete(ids["other"]),
    "live_info": lambda c, ids: c.live_info(),
    "live_ticket": lambda c, ids: c.live_ticket(),
    "default_webhook": lambda c, ids: c.default_webhook(),
    "set_default_webhook": lambda c, ids: c.set_default_webhook(None),
    "signing_secret": lambda c, ids: (c.signing_secret(), c.signing_secret(rotate=True)),
    "submit_batch": lambda c, ids: c.submit_batch([JOB]),
    "put_workflow": lambda c, ids: (c.put_workflow("titles", JOB), c.put_workflow("titles", JOB)),
    "workflows": lambda c, ids: c.workflows(),
    "workflow": lambda c, ids: (c.workflow("titles"), c.workflow("titles", 1)),
    "workflow_diff": lambda c, ids: c.workflow_diff("titles", 1, 2),
    "create_schedule": lambda c, ids: ids.update(schedule=c.create_schedule(SCHEDULE).schedule_id),
    "schedules": lambda c, ids: c.schedules(),
    "schedule": lambda c, ids: c.schedule(ids["schedule"]),
    "update_schedule": lambda c, ids: c.update_schedule(ids["schedule"], enabled=False),
    "run_schedule": lambda c, ids: c.run_schedule(ids["schedule"]),
    "schedule_runs": lambda c, ids: c.schedule_runs(ids["schedule"]),
    "pin_baseline": lambda c, ids: c.pin_baseline(ids["schedule"], None),
    "delete_schedule": lambda c, ids: c.delete_schedule(ids["schedule"]),
    "open_session": lambda c, ids: ids.update(session=c.open_session().session_id),
    "get_session": lambda c, ids: c.get_session(ids["session"]),
    "session_files": lambda c, ids: c.session_files(ids["session"]),
    "open_sessions": lambda c, ids: c.open_sessions(),
    "send_steps": lambda c, ids: ids.update(
        command=c.send_steps(
            ids["session"], {"action": "goto", "url": "http://127.0.0.1:9/"}, wait_s=0
        )
        .model_dump()
        .get("command_id", "x")
    ),
    "session_steps": lambda c, ids: c.session_steps(
        ids["session"], {"action": "goto", "url": "http://127.0.0.1:9/"}, wait_s=0, give_up_s=1
    ),
    "get_command": lambda c, ids: c.get_command(ids["session"], ids["command"]),
    "save_as_workflow": lambda c, ids: c.save_as_workflow(ids["session"], "from-session"),
    "save_session": lambda c, ids: _deprecated(lambda: c.save_session(ids["session"], "again")),
    # Refused (the session never started): the routes are made all the same.
    "take_over": lambda c, ids: c.take_over(ids["session"]),
    "send_input": lambda c, ids: c.send_input(
        ids["session"], "0" * 26, [{"type": "text", "text": "x"}], frame=(10, 10)
    ),
    "hand_back": lambda c, ids: c.hand_back(ids["session"]),
    "close_session": lambda c, ids: c.close_session(ids["session"]),
    "answer_part": lambda c, ids: c.answer_part(_answer(ids["session"]), "result"),
    "saved_logins": lambda c, ids: c.saved_logins(),
    "delete_saved_login": lambda c, ids: c.delete_saved_login("none"),
    "sessions": lambda c, ids: _deprecated(c.sessions),
    "delete_session": lambda c, ids: _deprecated(lambda: c.delete_session("none")),
    "tenant": lambda c, ids: c.tenant(),
    "usage": lambda c, ids: c.usage(),
    "tenant_of": lambda c, ids: c.tenant_of("routes"),
    "set_limits": lambda c, ids: c.set_limits("routes", max_running=2),
    "tenants_usage": lambda c, ids: c.tenants_usage(),
    "audit": lambda c, ids: c.audit(limit=1),
    "dead_letters": lambda c, ids: c.dead_letters(),
    "redrive": lambda c, ids: c.redrive([]),
    "stats": lambda c, ids: c.stats(),
    "download": lambda c, ids: c.download(STORAGE),
    "download_verified": lambda c, ids: c.download_verified(
        ArtifactLink(name="a.png", url=STORAGE, sha256="0" * 64, size=1, content_type="x")
    ),
    "close": lambda c, ids: c.close(),  # last: the client is closed after it
}


def _deprecated(call: Callable[[], Any]) -> Any:
    """An old name, kept: it warns, naming the new one, and does what the new one does."""
    with pytest.warns(
        DeprecationWarning, match="is (save_as_workflow|saved_logins|delete_saved_login)"
    ):
        return call()


def _drain(items: Any) -> list[Any]:
    import asyncio

    async def read() -> list[Any]:
        return [item async for item in items]

    return asyncio.run(read())


def _answer(session_id: str) -> StepsAnswer:
    part = {"url": STORAGE, "sha256": "0" * 64, "bytes": 1, "content_type": "application/json"}
    return StepsAnswer.model_validate(
        {
            "session_id": session_id,
            "command_id": "x",
            "status": "ready",
            "ok": True,
            "ran": 1,
            "parts": {"result": part},
        }
    )


def _matches(route: tuple[str, str], request: tuple[str, str]) -> bool:
    pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(route[1]))
    return route[0] == request[0] and re.fullmatch(pattern, request[1]) is not None


def test_every_method_calls_only_the_routes_the_sdk_page_names_for_it(
    api_env: Provisioned, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(CALLS) == {name for name, _ in public_methods()}, "give each method its call"
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "routes", admin=True)
    gateway = gateway_transport()
    current: list[tuple[str, str]] = []

    def record(request: httpx.Request) -> httpx.Response:
        if request.url.host != API:
            return httpx.Response(404)  # storage: no API route
        current.append((request.method, request.url.path))
        return gateway.handle_request(request)

    transport = httpx.MockTransport(record)

    class AsyncClient(httpx.AsyncClient):  # follow_async's own client, on the same gateway
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(transport=transport, **kwargs)

    monkeypatch.setattr(follow_async_module.httpx, "AsyncClient", AsyncClient)
    made: dict[str, list[tuple[str, str]]] = {}
    client = PagefleetClient(f"http://{API}", key, transport=transport)
    ids: dict[str, Any] = {}
    for name, call in CALLS.items():
        current.clear()
        # Refusals are fine (a job not in review, a session with no worker to run its
        # steps): the request was made, and it is the route that is checked here.
        with contextlib.suppress(ApiError, TimeoutError, CommandPending, StopIteration):
            call(client, ids)
        made[name] = list(current)

    wrong = {
        name: [r for r in requests if not any(_matches(d, r) for d in client_routes(name))]
        for name, requests in made.items()
    }
    assert {name: r for name, r in wrong.items() if r} == {}
    # Each route the page names is one the method calls (the page invents none).
    silent = {name for name, requests in made.items() if client_routes(name) and not requests}
    assert silent == set()
    assert made["close"] == [] and made["download"] == [] and made["answer_part"] == []
    assert made["follow"] and made["follow_async"] and made["session_steps"]
