"""The worker's job log: an exception is logged with its traceback and the job's keys."""

from __future__ import annotations

import logging

import pytest

from browser_task.observe.telemetry import JobLog


def test_an_exception_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    log = JobLog(job_id="j1")
    with caplog.at_level(logging.ERROR):
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            log.exception("unexpected error completing the job")
    [record] = [r for r in caplog.records if r.getMessage().startswith("unexpected error")]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.job_id == "j1"  # type: ignore[attr-defined]
