"""A context's ``request`` events, handed to all of a job's listeners through one of
Playwright's.

Four parts of a job read every request the browser sends: the scheme guard
(``run.executor.scheme_guard``), the navigation watch (``browser.page_view``), the shared
egress proxy's attribution (``egress.log``) and the usage meter (``observe.usage``).
Playwright calls each listener of its own through a wrapper that reads the listener's
signature with ``inspect`` on every call and maps the request to its API object again: four
listeners were 410 such calls a job on a page of a hundred requests, one is 104 (a profile,
docs/performance.md). One Playwright listener per context calls ours in turn.

A listener is a plain function: one with work to wait for starts it as a task itself (as
the scheme guard closes the context). One that raises is logged and the others still run,
as Playwright's own dispatch does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

RequestListener = Callable[[Any], None]
Listeners = list[tuple[str, Callable[..., Any]]]


class RequestEvents:
    """The one ``request`` listener a context has; the job's listeners are called in the
    order they were added."""

    def __init__(self) -> None:
        self._listeners: list[RequestListener] = []

    def add(self, listener: RequestListener) -> None:
        self._listeners.append(listener)

    def __call__(self, request: Any) -> None:
        for listener in self._listeners:
            try:
                listener(request)
            except Exception:
                log.exception("a request listener failed")


def on_request(context: Any, listeners: Listeners, listener: RequestListener) -> None:
    """Call ``listener`` with each request of ``context``. ``listeners`` is the job's note of
    what it registered (a warm context drops it before the next job): the one Playwright
    listener is registered with the first of the job's and noted there."""
    for event, registered in listeners:
        if event == "request" and isinstance(registered, RequestEvents):
            registered.add(listener)
            return
    events = RequestEvents()
    events.add(listener)
    context.on("request", events)
    listeners.append(("request", events))
