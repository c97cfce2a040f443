"""Structured logs and EMF metrics for the worker.

Logs: one Powertools Logger, so lines have the Lambda functions' JSON shape and key names
(``level``, ``location``, ``message``, ``timestamp``, ``service``, ``correlation_id``,
``job_id``, ``tenant_id``; tests/worker/test_correlation.py holds both sides to it). Per-job
keys travel as ``extra`` on each call rather than ``append_keys``, because two slots log
concurrently from one event loop and the logger's appended keys are process-wide.

Metrics: Powertools ``EphemeralMetrics`` (no state shared between instances) buffer values
in memory and are flushed as EMF lines on a timer and at shutdown, never per job, so the hot
path only appends to a list. ``JobsFinished`` needs a ``status`` dimension, and an EMF blob
has one dimension set, so each status gets its own buffer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from pagefleet.jobs.lifecycle import MessageAnswer, Then
from pagefleet.jobs.states import JobStatus
from pagefleet.specs import metrics_names as names

# The dashboard matches metrics on their full dimension set, service included.
SERVICE = names.WORKER_SERVICE
NAMESPACE = names.NAMESPACE

logger = Logger(service=SERVICE)


_EMITTERS: dict[int, Any] = {
    logging.DEBUG: logger.debug,
    logging.INFO: logger.info,
    logging.WARNING: logger.warning,
    logging.ERROR: logger.error,
}


# Also receives a job's log lines (its run events): level name, message, fields.
LogSink = Callable[[str, str, dict[str, Any]], None]


class JobLog:
    """Logs with the job's correlation keys on every line. Never pass page contents here."""

    __slots__ = ("_keys", "_sink")

    def __init__(self, _sink: LogSink | None = None, **keys: Any) -> None:
        self._keys = {k: v for k, v in keys.items() if v is not None}
        self._sink = _sink

    def bind(self, **keys: Any) -> JobLog:
        return JobLog(self._sink, **{**self._keys, **keys})

    def recording(self, sink: LogSink | None) -> JobLog:
        """The same log, whose lines also go to ``sink`` (a job's run events)."""
        return JobLog(sink, **self._keys)

    @property
    def keys(self) -> Mapping[str, Any]:
        return self._keys

    def _log(self, level: int, message: str, fields: dict[str, Any], exc_info: bool) -> None:
        emit = _EMITTERS[level]
        emit(message, extra={**self._keys, **fields}, exc_info=exc_info, stacklevel=4)
        if self._sink is not None:
            self._sink(logging.getLevelName(level).lower(), message, fields)

    def debug(self, message: str, **fields: Any) -> None:
        self._log(logging.DEBUG, message, fields, False)

    def info(self, message: str, **fields: Any) -> None:
        self._log(logging.INFO, message, fields, False)

    def warning(self, message: str, *, exc_info: bool = False, **fields: Any) -> None:
        self._log(logging.WARNING, message, fields, exc_info)

    def error(self, message: str, *, exc_info: bool = False, **fields: Any) -> None:
        self._log(logging.ERROR, message, fields, exc_info)

    def exception(self, message: str, **fields: Any) -> None:
        """An error with the exception being handled (as ``logging.Logger.exception``)."""
        self._log(logging.ERROR, message, fields, True)


class WorkerMetrics:
    """Buffered EMF metrics with the ``pool`` dimension; ``flush()`` prints them."""

    def __init__(self, pool: str, *, flush_interval_s: float = 60.0) -> None:
        self._pool = pool
        self._interval = flush_interval_s
        self._main = self._new()
        self._by_status: dict[str, EphemeralMetrics] = {}
        self._pending = False
        self._busy = 0

    def _new(self, **dimensions: str) -> EphemeralMetrics:
        metrics = EphemeralMetrics(namespace=names.runtime_namespace(), service=SERVICE)
        metrics.set_default_dimensions(**{names.DIM_POOL: self._pool}, **dimensions)
        return metrics

    def job_finished(self, status: str, duration_ms: float) -> None:
        bucket = self._by_status.get(status)
        if bucket is None:
            bucket = self._by_status[status] = self._new(**{names.DIM_STATUS: status})
        bucket.add_metric(name=names.JOBS_FINISHED, unit=MetricUnit.Count, value=1)
        self._main.add_metric(
            name=names.JOB_DURATION, unit=MetricUnit.Milliseconds, value=duration_ms
        )
        self._pending = True

    def queue_delay(self, delay_ms: float) -> None:
        self._main.add_metric(
            name=names.QUEUE_DELAY, unit=MetricUnit.Milliseconds, value=max(0.0, delay_ms)
        )
        self._pending = True

    def count(self, name: str, value: float = 1) -> None:
        """names.RETRIES, names.TIMEOUTS, names.BROWSER_CRASHES."""
        self._main.add_metric(name=name, unit=MetricUnit.Count, value=value)
        self._pending = True

    def slots_busy(self, busy: int) -> None:
        """Gauge of busy slots, at each change and sampled at each flush: the dashboard's
        saturation, and the jobs running per task the idle scale-in reads (a long job's
        task must show busy every minute, not only when a job starts or ends)."""
        self._busy = busy
        self._main.add_metric(name=names.SLOTS_BUSY, unit=MetricUnit.Count, value=busy)
        self._pending = True

    def sessions_lost(self, count: int) -> None:
        """Browser sessions whose lease this worker took back (their worker died): counted
        where the lost-sessions alarm reads every runtime's count, and written at once."""
        metrics = EphemeralMetrics(
            namespace=names.runtime_namespace(), service=names.SESSIONS_SERVICE
        )
        metrics.add_metric(name=names.SESSIONS_LOST, unit=MetricUnit.Count, value=count)
        metrics.flush_metrics()

    def dead_lettered(self, count: int) -> None:
        """Jobs dead-lettered here (their workers kept dying): counted where the dead-letter
        alarm reads every runtime's count, and written at once."""
        metrics = EphemeralMetrics(
            namespace=names.runtime_namespace(), service=names.DEAD_LETTERS_SERVICE
        )
        metrics.add_metric(name=names.DEAD_LETTERED, unit=MetricUnit.Count, value=count)
        metrics.flush_metrics()

    def flush(self) -> None:
        self.slots_busy(self._busy)
        if not self._pending:
            return
        self._pending = False
        for metrics in (self._main, *self._by_status.values()):
            if metrics.metric_set:
                metrics.flush_metrics(raise_on_empty_metrics=True)

    async def run_flusher(self) -> None:
        """Flush on a timer until cancelled; the final flush is the caller's job."""
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                await asyncio.sleep(self._interval)
                self.flush()


def noted(answer: MessageAnswer, log: JobLog, metrics: WorkerMetrics) -> None:
    """Log (and count) what the lifecycle did with a message it did not let us run."""
    if answer.status is not None:
        metrics.job_finished(answer.status.value, 0.0)
    if answer.status is JobStatus.DEAD_LETTERED:  # its claim took the limit's lost lease
        metrics.dead_lettered(1)
    if answer.session_lost:  # its claim found the session's worker gone
        metrics.sessions_lost(1)
    if answer.then is Then.LEAVE:
        log.warning("message left for redelivery", reason=answer.reason)
    else:
        log.info("message handled without running", then=answer.then.value, reason=answer.reason)
