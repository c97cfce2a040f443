"""Where the worker reports into an attempt's run events: its log lines, its page's
navigations (and console, when asked), each step's start and finish with its time and cost,
and how the attempt ended. The recorder itself is ``browser_task.observe.run_events``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from browser_task.observe.run_events import RunEvents
from pagefleet.jobs.moves import Outcome
from pagefleet.jobs.step_times import StepTime
from pagefleet.live.events import EventType, now_iso
from pagefleet.tenancy.spend import step_cost_usd


def log_sink(events: RunEvents) -> Callable[[str, str, dict[str, Any]], None]:
    """A ``JobLog`` sink: the job's log lines become ``log`` events."""

    def sink(level: str, message: str, fields: dict[str, Any]) -> None:
        detail = ", ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
        text = f"{message} ({detail})" if detail else message
        events.emit(EventType.LOG, level=level, message=text)

    return sink


def watch_page(
    events: RunEvents,
    page: Any,
    *,
    capture_console: bool,
    listeners: list[tuple[str, Callable[..., Any]]] | None = None,
) -> None:
    """Navigations of the page's main frame; its console and errors when the job asks.

    Each listener is noted in ``listeners`` (as ``page:<event>``): a warm context's page
    outlives the job, and parking it removes them, so no later job reports into this one."""
    added = listeners if listeners is not None else []

    def on(event: str, handler: Callable[..., Any]) -> None:
        page.on(event, handler)
        added.append((f"page:{event}", handler))

    def navigated(frame: Any) -> None:
        if frame == page.main_frame:
            events.emit(EventType.NAVIGATION, url=frame.url)

    on("framenavigated", navigated)
    if not capture_console:
        return

    def console(message: Any) -> None:
        events.emit(EventType.CONSOLE, level=message.type, message=message.text)

    def page_error(error: Any) -> None:
        events.emit(EventType.PAGE_ERROR, level="error", message=str(error))

    on("console", console)
    on("pageerror", page_error)


@contextlib.contextmanager
def step_events(
    events: RunEvents | None, index: int | None, of: int, path: str, action: str, label: str
) -> Any:
    """``step_started``, then ``step_finished`` with its duration and outcome."""
    if events is None:
        yield
        return
    where = {"index": index, "of": of, "path": path, "action": action, "label": label}
    events.emit(EventType.STEP_STARTED, **where)
    started_at = now_iso(events.clock())
    started = time.monotonic()
    outcome, reason = "ok", None
    try:
        yield
    except asyncio.CancelledError:
        outcome = "stopped"
        raise
    except Exception as exc:
        outcome, reason = "failed", str(getattr(exc, "message", None) or exc)
        raise
    finally:
        seconds = time.monotonic() - started
        cost = step_cost_usd(seconds, events.pricing) if events.pricing is not None else None
        events.emit(
            EventType.STEP_FINISHED,
            **where,
            duration_ms=round(seconds * 1000),
            outcome=outcome,
            message=reason,
            cost_usd=cost,
        )
        if index is not None and path == str(index) and cost is not None:
            events.step_ran(
                StepTime(
                    index=index,
                    action=action,
                    started_at=started_at,
                    duration_ms=round(seconds * 1000),
                    outcome=outcome,
                    cost_usd=cost,
                )
            )


def with_step_times(outcome: Outcome | None, events: RunEvents | None) -> Outcome | None:
    """The outcome with the attempt's top-level steps' times and costs (kept with it)."""
    if outcome is None or events is None or not events.step_times:
        return outcome
    return replace(outcome, steps=list(events.step_times))


def attempt_ended(
    events: RunEvents, status: str, error: Any | None, retry_delay_s: int | None
) -> None:
    """How the attempt ended: a ``retry`` event when it runs again, and its ``state``."""
    if status == "retry_scheduled" and error is not None:
        events.emit(
            EventType.RETRY,
            reason=getattr(error, "message", None),
            kind=getattr(error, "kind", None),
            delay_s=retry_delay_s,
        )
    events.emit(EventType.STATE, status=status)
