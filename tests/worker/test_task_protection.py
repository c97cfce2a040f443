"""ECS task scale-in protection against the ECS agent's stand-in on 127.0.0.1
(``devstack.ecs_agent``: protection lapses after its period, as on ECS)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from browser_task.observe.task_protection import TaskProtection
from devstack.ecs_agent import EcsAgent


class FakeTime:
    """Wall seconds the agent reads and the sleeps the worker's renewal takes, moved by the
    test: hours pass in milliseconds, and nothing depends on how loaded the machine is."""

    def __init__(self) -> None:
        self.now_s = 1_800_000_000.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self.now_s

    async def sleep(self, seconds: float) -> None:
        entry = (self.now_s + seconds, asyncio.get_running_loop().create_future())
        self._sleepers.append(entry)
        try:
            await entry[1]
        finally:
            self._sleepers.remove(entry)

    def advance(self, seconds: float) -> None:
        self.now_s += seconds
        for deadline, woken in self._sleepers:
            if deadline <= self.now_s and not woken.done():
                woken.set_result(None)

    async def settled(self, sleepers: int = 1) -> None:
        """Until ``sleepers`` are asleep, none of them due: whatever woke (a renewal, its
        PUT) is done and asleep again."""
        for _ in range(1000):
            asleep = [d for d, w in self._sleepers if d > self.now_s and not w.done()]
            if len(asleep) == len(self._sleepers) == sleepers:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{len(self._sleepers)} asleep, not {sleepers}")


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime()


@pytest.fixture
def agent(clock: FakeTime) -> Iterator[EcsAgent]:
    stand_in = EcsAgent(clock=clock.now)
    stand_in.start()
    yield stand_in
    stand_in.stop()


def test_protected_while_any_job_runs(agent: EcsAgent) -> None:
    async def scenario() -> TaskProtection:
        tp = TaskProtection(agent.url)
        await tp.job_started()
        assert tp.protected and agent.protected()
        await tp.job_started()  # second slot: no extra call
        await tp.job_ended()
        assert tp.protected and agent.protected()  # one job still in flight
        await tp.job_ended()
        await tp.close()
        return tp

    tp = asyncio.run(scenario())
    assert not tp.protected and not agent.protected()
    assert agent.puts == [
        {"ProtectionEnabled": True, "ExpiresInMinutes": 60},
        {"ProtectionEnabled": False},
    ]
    assert agent.refused == []


def test_a_worker_busy_for_hours_stays_protected_past_each_period(
    agent: EcsAgent, clock: FakeTime
) -> None:
    """ECS lets protection lapse after ``ExpiresInMinutes`` however busy the task is; a pool
    under a steady load keeps some slot busy for hours. Set once (the worker before), the
    stand-in said unprotected from minute 60 on, and a scale-in would have stopped the task
    with jobs running."""

    async def scenario() -> tuple[TaskProtection, list[int]]:
        tp = TaskProtection(agent.url, sleep=clock.sleep)
        await tp.job_started()
        await tp.job_started()
        await clock.settled()  # the renewal waits from when protection was set
        unprotected = []
        for minute in range(1, 181):
            if minute in (70, 140):  # jobs come and go; one is always running
                await tp.job_ended()
                await tp.job_started()
            clock.advance(60)
            await clock.settled()
            if not agent.protected():
                unprotected.append(minute)
        await tp.job_ended()
        await tp.job_ended()
        await tp.close()
        return tp, unprotected

    tp, unprotected = asyncio.run(scenario())
    assert unprotected == []
    assert tp.renewals == 6  # each half hour
    assert not agent.protected()  # idle again: protection given back at once
    assert agent.puts[-1] == {"ProtectionEnabled": False}


def test_a_refused_renewal_is_asked_again_each_minute_until_taken(
    agent: EcsAgent, clock: FakeTime
) -> None:
    async def scenario() -> tuple[TaskProtection, list[int]]:
        tp = TaskProtection(agent.url, sleep=clock.sleep)
        await tp.job_started()
        await clock.settled()
        agent.throttle(3)  # ECS answers "Rate exceeded" to the renewal at 30 and at 31, 32
        unprotected = []
        for minute in range(1, 71):
            clock.advance(60)
            await clock.settled()
            if not agent.protected():
                unprotected.append(minute)
        await tp.job_ended()
        await tp.close()
        return tp, unprotected

    tp, unprotected = asyncio.run(scenario())
    assert agent.refused == ["ThrottlingException"] * 3
    assert unprotected == []
    assert tp.renewals == 2  # at 33, then half an hour later (63)


def test_the_agent_stand_in_refuses_what_the_agent_and_ecs_refuse(
    agent: EcsAgent, clock: FakeTime
) -> None:
    def put(body: Any) -> tuple[int, dict[str, Any]]:
        data = (
            body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
        )
        request = urllib.request.Request(
            f"{agent.url}/task-protection/v1/state", data=data, method="PUT"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())

    for body, says in [
        (None, "does not contain 'ProtectionEnabled'"),
        ({"ExpiresInMinutes": 5}, "does not contain 'ProtectionEnabled'"),
        ({"ProtectionEnabled": "yes"}, "failed to decode"),
        ({"ProtectionEnabled": True, "ExpiresInMinutes": True}, "failed to decode"),
        ({"ProtectionEnabled": True, "ExpiresInMinutes": 1.5}, "failed to decode"),
        ({"ProtectionEnabled": True, "Minutes": 5}, "failed to decode"),
        (b"{not json", "failed to decode"),
        ({"ProtectionEnabled": True, "ExpiresInMinutes": 0}, "between 1 and 2880"),
        ({"ProtectionEnabled": True, "ExpiresInMinutes": 2881}, "between 1 and 2880"),
    ]:
        status, answer = put(body)
        assert status == 400, body
        assert answer["error"]["Code"] == "InvalidParameterException"
        assert says in answer["error"]["Message"], body
    assert not agent.protected() and agent.puts == []

    status, answer = put({"ProtectionEnabled": True})  # ECS's default period: two hours
    assert status == 200 and answer["protection"]["ProtectionEnabled"] is True
    assert answer["protection"]["ExpirationDate"].endswith("Z")
    clock.advance(119 * 60)
    assert agent.protected()
    clock.advance(60)  # the period lapses: unprotected, busy or not
    assert not agent.protected()
    with urllib.request.urlopen(f"{agent.url}/task-protection/v1/state", timeout=10) as resp:
        assert json.loads(resp.read())["protection"] == {
            "ExpirationDate": None,
            "ProtectionEnabled": False,
            "TaskArn": answer["protection"]["TaskArn"],
        }


def test_a_period_ecs_would_refuse_is_refused_when_the_worker_is_built() -> None:
    for minutes in (0, 2881):
        with pytest.raises(ValueError, match="1 to 2880 minutes"):
            TaskProtection("http://127.0.0.1:9", expires_minutes=minutes)


def test_refusal_is_not_taken_for_protection(clock: FakeTime) -> None:
    standalone = EcsAgent(clock=clock.now, in_service=False)  # a task of no service

    async def scenario(uri: str) -> TaskProtection:
        tp = TaskProtection(uri)
        await tp.job_started()
        return tp

    try:
        tp = asyncio.run(scenario(standalone.start()))
    finally:
        standalone.stop()
    assert not tp.protected
    assert standalone.refused == ["TASK_NOT_VALID"]


def test_outside_ecs_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ECS_AGENT_URI", raising=False)

    async def scenario() -> TaskProtection:
        tp = TaskProtection()
        await tp.job_started()
        return tp

    tp = asyncio.run(scenario())
    assert not tp.enabled
    assert tp.calls == 0


def test_an_agent_that_is_gone_leaves_it_unprotected() -> None:
    async def scenario(uri: str) -> TaskProtection:
        tp = TaskProtection(uri)
        await tp.job_started()
        return tp

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
