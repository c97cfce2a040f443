"""Every egress refusal as one line of the worker's log, attributed to its job, and a metric.

A refusal happens in one of three places: the job's own checks (``EgressGuard``: a goto's
target, the scheme watch), the job's own egress listener (a job with ``options.proxy``), or
the worker's egress proxy, which every other job's browser traffic goes through. The first
two know their job. The shared proxy does not (its clients are one Chromium's sockets), so
each running job's context reports the hosts its requests go to, and a refusal is put down
to the job that asked for that host and port, most recently; when none did (a connection
Chromium opened on its own), to the only job running, if there is one. Chromium's report of
a request and the proxy's connection race each other, so while several jobs run a refusal
waits a moment before it is attributed.

The line is ``egress refused`` (Powertools JSON: timestamp, level, service) with the job's
keys (job_id, tenant_id, correlation_id, attempt) and host, port, kind, reason; the metric
``EgressRefusals`` counts them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from browser_task.browser import BrowserSession
from browser_task.egress import EgressGuard, RefusalSink, normalize_host
from browser_task.egress_http import POLICY
from browser_task.egress_proxy import Decision
from browser_task.telemetry import JobLog, WorkerMetrics
from pagefleet.specs import metrics_names as names

MESSAGE = "egress refused"
# How long an unclear refusal waits for the browser's report of the request behind it.
ATTRIBUTION_WAIT_S = 0.5
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


@dataclass(eq=False)
class TrackedJob:
    """A running job whose requests go through the worker's shared egress proxy."""

    log: JobLog
    requested: dict[tuple[str, int | None], float] = field(default_factory=dict)
    ended_at: float | None = None

    def on_request(self, request: Any) -> None:
        self.requested[target_of(request.url)] = time.monotonic()


class EgressLog:
    def __init__(self, metrics: WorkerMetrics | None = None) -> None:
        self._metrics = metrics
        self._jobs: list[TrackedJob] = []
        self._unattributed = JobLog()

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

    def attach(self, log: JobLog, guard: EgressGuard, session: BrowserSession) -> TrackedJob | None:
        """Before a job's first step: its checks, and its own listener or its share of the
        worker's proxy, report to ``log``. A tracked job is ``done`` when it ends."""
        report = self.sink(log)
        guard.on_refusal = report
        own = session.egress
        if own is not None:
            own.on_refusal = lambda d: report(d.host, d.port, d.kind or POLICY, d.reason or "")
            return None
        job = self.track(log)
        session.context.on("request", job.on_request)
        session.listeners.append(("request", job.on_request))  # dropped when parked
        return job

    # --- the shared proxy -------------------------------------------------------------------
    def track(self, log: JobLog) -> TrackedJob:
        """A job starts on the shared proxy; ``done`` it when it ends."""
        self._prune()
        job = TrackedJob(log)
        self._jobs.append(job)
        return job

    def done(self, job: TrackedJob) -> None:
        job.ended_at = time.monotonic()

    def proxy_refused(self, decision: Decision) -> None:
        """The shared proxy's refusal (called on the worker's event loop)."""
        self._prune()
        if len(self._jobs) <= 1:
            self._attribute(decision)  # one job or none: nothing to tell apart
        else:
            asyncio.get_running_loop().call_later(ATTRIBUTION_WAIT_S, self._attribute, decision)

    def _attribute(self, decision: Decision) -> None:
        self._prune()
        target = (normalize_host(decision.host), decision.port)
        asked = [j for j in self._jobs if target in j.requested]
        if asked:
            job: TrackedJob | None = max(asked, key=lambda j: j.requested[target])
        else:
            running = [j for j in self._jobs if j.ended_at is None]
            job = running[0] if len(running) == 1 else None
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
