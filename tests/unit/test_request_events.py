"""A context has one Playwright ``request`` listener however many of a job's parts read its
requests (browser_task.observe.request_events): Playwright inspects each of its listeners'
signatures on every call. A warm context drops it, with the job's listeners, when parked."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from browser_task.browser.warm import RecordingContext, WarmContexts
from browser_task.observe.request_events import Listeners, RequestEvents, on_request


class FakeContext:
    """A context's listener registry, as Playwright's emitter keeps it."""

    def __init__(self) -> None:
        self.registered: dict[str, list[Callable[..., Any]]] = {}

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        self.registered.setdefault(event, []).append(handler)

    def remove_listener(self, event: str, handler: Callable[..., Any]) -> None:
        self.registered[event].remove(handler)

    def emit(self, event: str, *args: Any) -> None:
        for handler in list(self.registered.get(event, [])):
            handler(*args)

    async def close(self) -> None:
        return None


def test_four_readers_of_a_contexts_requests_are_one_playwright_listener_called_in_order() -> None:
    context, listeners = FakeContext(), Listeners()
    seen: list[tuple[str, str]] = []

    def reader(name: str) -> Callable[[Any], None]:
        return lambda url: seen.append((name, url))

    for name in ("scheme", "navigation", "egress", "meter"):
        on_request(context, listeners, reader(name))
    assert len(context.registered["request"]) == 1
    assert [event for event, _ in listeners] == ["request"]
    context.emit("request", "http://a/1")
    context.emit("request", "http://a/2")
    assert seen == [
        (name, url)
        for url in ("http://a/1", "http://a/2")
        for name in ("scheme", "navigation", "egress", "meter")
    ]


def test_a_listener_that_raises_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    context, listeners, seen = FakeContext(), Listeners(), list[Any]()

    def broken(_request: Any) -> None:
        raise ValueError("broken")

    on_request(context, listeners, broken)
    on_request(context, listeners, seen.append)
    with caplog.at_level(logging.ERROR):
        context.emit("request", "r")
    assert seen == ["r"]
    assert "a request listener failed" in caplog.text


def test_a_setups_request_listener_joins_the_same_one() -> None:
    context, listeners, seen = FakeContext(), Listeners(), list[Any]()
    RecordingContext(context, listeners).on("request", seen.append)  # type: ignore[arg-type]
    on_request(context, listeners, seen.append)
    RecordingContext(context, listeners).on("close", seen.append)  # type: ignore[arg-type]
    assert len(context.registered["request"]) == 1
    assert isinstance(context.registered["request"][0], RequestEvents)
    context.emit("request", "r")
    assert seen == ["r", "r"]


def test_a_parked_context_keeps_no_listener_of_the_job_before() -> None:
    context, listeners, seen = FakeContext(), Listeners(), list[Any]()
    RecordingContext(context, listeners).on("request", seen.append)  # type: ignore[arg-type]
    on_request(context, listeners, seen.append)

    class Generation:
        async def within(self, work: Any, _timeout: float) -> Any:
            return await work

    warm = WarmContexts(1)
    warm._reset = lambda context, page: asyncio.sleep(0)  # type: ignore[method-assign]
    parked = asyncio.run(warm.park("k", context, object(), Generation(), 1, listeners))  # type: ignore[arg-type]
    assert parked
    assert context.registered["request"] == []
    context.emit("request", "r")
    assert seen == []
