"""ECS task scale-in protection against a stand-in for the ECS agent on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from browser_task.observe.task_protection import TaskProtection
from devstack.loopback import serve_on_loopback


class FakeAgent(BaseHTTPRequestHandler):
    calls: list[dict] = []
    fail = False
    status = 200

    def do_PUT(self) -> None:
        length = int(self.headers["Content-Length"])
        body = json.loads(self.rfile.read(length))
        FakeAgent.calls.append({"path": self.path, **body})
        payload = {"failure": {"Reason": "MISSING"}} if FakeAgent.fail else {"protection": body}
        data = json.dumps(payload).encode()
        self.send_response(FakeAgent.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def agent() -> Iterator[str]:
    FakeAgent.calls = []
    FakeAgent.fail = False
    FakeAgent.status = 200
    server = serve_on_loopback(FakeAgent, "fake-ecs-agent")
    yield server.url
    server.stop()


def test_protected_while_any_job_runs(agent: str) -> None:
    async def scenario() -> TaskProtection:
        tp = TaskProtection(agent)
        await tp.job_started()
        assert tp.protected
        await tp.job_started()  # second slot: no extra call
        await tp.job_ended()
        assert tp.protected  # one job still in flight
        await tp.job_ended()
        return tp

    tp = asyncio.run(scenario())
    assert not tp.protected
    assert [c["ProtectionEnabled"] for c in FakeAgent.calls] == [True, False]
    assert FakeAgent.calls[0]["path"] == "/task-protection/v1/state"
    assert FakeAgent.calls[0]["ExpiresInMinutes"] == 60


def test_refusal_is_not_taken_for_protection(agent: str) -> None:
    FakeAgent.fail = True

    async def scenario() -> TaskProtection:
        tp = TaskProtection(agent)
        await tp.job_started()
        return tp

    assert not asyncio.run(scenario()).protected


def test_outside_ecs_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ECS_AGENT_URI", raising=False)

    async def scenario() -> TaskProtection:
        tp = TaskProtection()
        await tp.job_started()
        return tp

    tp = asyncio.run(scenario())
    assert not tp.enabled
    assert tp.calls == 0


def test_an_agent_answering_an_error_status_or_gone_leaves_it_unprotected(agent: str) -> None:
    FakeAgent.status = 500

    async def scenario(uri: str) -> TaskProtection:
        tp = TaskProtection(uri)
        await tp.job_started()
        return tp

    assert not asyncio.run(scenario(agent)).protected
    assert len(FakeAgent.calls) == 1  # it was asked, and said no
    assert not asyncio.run(scenario("http://127.0.0.1:9")).protected  # nothing listens


def test_the_worker_imports_no_http_client_package_and_no_image_library() -> None:
    """An idle worker holds only what a plain job uses (bench/worker_memory.py): httpx (with
    the click, rich and pygments its package loads) and Pillow come with nothing it runs."""
    code = (
        "import sys, browser_task.__main__; "
        "print(sorted(m for m in ('httpx', 'rich', 'click', 'pygments', 'PIL') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
