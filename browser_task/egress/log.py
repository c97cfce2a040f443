"""Every egress refusal as one line of the worker's log, attributed to its job, and a metric.

A refusal happens in one of three places: the job's own checks (``EgressGuard``: a goto's
target, the scheme watch), the job's own egress listener (a job with ``options.proxy``), or
the worker's egress proxy, which every other job's browser traffic goes through. The first
two know their job. The shared proxy does not (its clients are one Chromium's sockets), so
each running job's context reports the hosts its requests go to, and a refusal is put down
to the job that asked for that host and port, most recently; when none did (a connection
Chromium opened on its own), to the only job running, if there is one. Chromium's report of
a request and the proxy's connection race each other (on a loaded machine the report can
come seconds later), so while several jobs run, a refusal no job has asked for yet waits
for the report that names its job, and is put down to it the moment it comes (at most
``ATTRIBUTION_MAX_WAIT_S``; then as above).

The line is ``egress refused`` (Powertools JSON: timestamp, level, service) with the job's
keys (job_id, tenant_id, correlation_id, attempt) and host, port, kind, reason; the metric
``EgressRefusals`` counts them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from browser_task.egress.guard import RefusalSink, normalize_host
from browser_task.egress.http import POLICY
from browser_task.egress.proxy import Decision, EgressProxy
from browser_task.observe.request_events import on_request
from browser_task.observe.telemetry import JobLog, WorkerMetrics
from pagefleet.specs import metrics_names as names

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext

MESSAGE = "egress refused"
# How long an unclear refusal waits for the browser's report of the request behind it.
ATTRIBUTION_MAX_WAIT_S = 5.0
# A job that ended is still a candidate this long (its last requests' refusals may be late).
ENDED_KEPT_S = 5.0
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def target_of(url: str) -> tuple[str, int | None]:
    """(host, port) of a URL as the egress proxy sees its target; ("", None) if none."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "", None
    return normalize_host(parts.hostname or ""), port or _DEFAULT_PORTS.get(parts.scheme.lower())


class EgressHolder(Protocol):
    """What a job's browser session offers its egress log (``browser_task.browser.pool``):
    its own listener, if it has one, else the context the shared proxy serves."""

    egress: EgressProxy | None
    context: BrowserContext
    listeners: list[tuple[str, Callable[..., Any]]]


@dataclass(eq=False)
class _Waiting:
    """A shared-proxy refusal that no job has asked for yet."""

    decision: Decision
    # The jobs running when it was refused: the fallback's "only job running" is of then.
    running: list[TrackedJob]
    timer: asyncio.TimerHandle | None = None


@dataclass(eq=False)
class TrackedJob:
    """A running job whose requests go through the worker's shared egress proxy."""

    log: JobLog
    # Told of each target the job asks for (the egress log's refusals waiting for it).
    on_target: Callable[[TrackedJob, tuple[str, int | None]], None] = lambda job, target: None
    requested: dict[tuple[str, int | None], float] = field(default_factory=dict)
    ended_at: float | None = None

    def on_request(self, request: Any) -> None:
        target = target_of(request.url)
        self.requested[target] = time.monotonic()
        self.on_target(self, target)


class EgressLog:
    def __init__(self, metrics: WorkerMetrics | None = None) -> None:
        self._metrics = metrics
        self._jobs: list[TrackedJob] = []
        self._unattributed = JobLog()
        # Shared-proxy refusals no job has asked for yet, each with its fallback timer.
        self._waiting: list[_Waiting] = []

    def refused(
        self, log: JobLog | None, host: str, port: int | None, kind: str, reason: str
    ) -> None:
        """One refusal: the line, with the job's keys when it is known, and the count."""
        (log or self._unattributed).warning(MESSAGE, host=host, port=port, kind=kind, reason=reason)
        if self._metrics is not None:
            self._metrics.count(names.EGRESS_REFUSALS)

    def sink(self, log: JobLog) -> RefusalSink:
        """What a job's own checks and its own egress listener report to."""

        def report(host: str, port: int | None, kind: str, reason: str) -> None:
            self.refused(log, host, port, kind, reason)

        return report

    def decisions(self, log: JobLog) -> Callable[[Decision], None]:
        """What a job's own egress listener reports to (its refusals are the job's)."""
        report = self.sink(log)
        return lambda d: report(d.host, d.port, d.kind or POLICY, d.reason or "")

    def follow(self, log: JobLog, session: EgressHolder) -> TrackedJob | None:
        """Before a job's first step: a job on the worker's shared proxy reports the hosts
        its requests go to, so that the proxy's refusals are put down to it (a job with
        its own listener needs none). A tracked job is ``done`` when it ends."""
        if session.egress is not None:
            return None
        job = self.track(log)
        on_request(session.context, session.listeners, job.on_request)  # dropped when parked
        return job

    # --- the shared proxy -------------------------------------------------------------------
    def track(self, log: JobLog) -> TrackedJob:
        """A job starts on the shared proxy; ``done`` it when it ends."""
        self._prune()
        job = TrackedJob(log, on_target=self._asked)
        self._jobs.append(job)
        return job

    def done(self, job: TrackedJob) -> None:
        job.ended_at = time.monotonic()

    def proxy_refused(self, decision: Decision) -> None:
        """The shared proxy's refusal (called on the worker's event loop)."""
        self._prune()
        if self._asker(decision) is not None or len(self._jobs) <= 1:
            self._attribute(decision)  # its job is known, or there is nothing to tell apart
            return
        loop = asyncio.get_running_loop()
        waiting = _Waiting(decision, self._running())
        waiting.timer = loop.call_later(ATTRIBUTION_MAX_WAIT_S, self._gave_up, waiting)
        self._waiting.append(waiting)

    def _gave_up(self, waiting: _Waiting) -> None:
        if waiting in self._waiting:
            self._waiting.remove(waiting)
            self._attribute(waiting.decision, waiting.running)

    def _asked(self, job: TrackedJob, target: tuple[str, int | None]) -> None:
        """A job reported a request: the refusals waiting for that target are its own."""
        for waiting in [w for w in self._waiting if _target(w.decision) == target]:
            self._waiting.remove(waiting)
            if waiting.timer is not None:
                waiting.timer.cancel()
            self._report(job, waiting.decision)

    def _asker(self, decision: Decision) -> TrackedJob | None:
        target = _target(decision)
        asked = [j for j in self._jobs if target in j.requested]
        return max(asked, key=lambda j: j.requested[target]) if asked else None

    def _attribute(self, decision: Decision, running: list[TrackedJob] | None = None) -> None:
        """To the job that asked for its target, else the only job running (``running``:
        when it was refused), else nobody's."""
        self._prune()
        job = self._asker(decision)
        if job is None:
            running = self._running() if running is None else running
            job = running[0] if len(running) == 1 else None
        self._report(job, decision)

    def _running(self) -> list[TrackedJob]:
        return [j for j in self._jobs if j.ended_at is None]

    def _report(self, job: TrackedJob | None, decision: Decision) -> None:
        self.refused(
            job.log if job is not None else None,
            decision.host,
            decision.port,
            decision.kind or POLICY,
            decision.reason or "",
        )

    def _prune(self) -> None:
        horizon = time.monotonic() - ENDED_KEPT_S
        self._jobs = [j for j in self._jobs if j.ended_at is None or j.ended_at > horizon]


def _target(decision: Decision) -> tuple[str, int | None]:
    return normalize_host(decision.host), decision.port
