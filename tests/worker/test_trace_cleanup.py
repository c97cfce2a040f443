"""A worker's traces, kept or not, leave nothing behind (real Chromium, real Playwright driver).

Playwright's driver makes a ``playwright-tracing-*`` directory for every started trace and
keeps appending later calls' stacks to it until the trace is stopped. A worker that only
closed its contexts left one directory a job and a driver whose memory grew with the
square of the jobs it ran.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pagefleet.jobs.states import JobStatus
from tests.worker.conftest import submit, wait_for_job

pytestmark = pytest.mark.e2e


def _leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.glob("playwright-tracing-*"))


@pytest.fixture
def driver_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temporary directory of the driver the worker starts (it reads TMPDIR): this
    test's own, so other tests' browsers are not counted. Short, because Chromium puts a
    Unix socket under it."""
    path = Path(tempfile.mkdtemp(prefix="pf-drv-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_traces_kept_or_not_leave_no_directory_behind(
    site, services, settings, run_worker, driver_tmp
):
    url = site.add("/fine", "<h1>fine</h1>")
    goto = {"action": "goto", "url": url}
    extract = {"action": "extract", "name": "heading", "selector": "h1"}
    never = {"action": "wait_for", "selector": "#never", "timeout_ms": 300}
    # Recorded on every attempt, kept on failure only: the plain jobs' traces are dropped.
    on_failure = {"trace": "retain-on-failure"}
    plain = [submit(services, {"steps": [goto, extract], "options": on_failure}) for _ in range(3)]
    failing = submit(services, {"steps": [goto, never], "options": on_failure})
    asked = submit(services, {"steps": [goto, extract], "options": {"trace": True}})

    running = run_worker(settings)
    done = {job.job_id: wait_for_job(services, job.job_id) for job in [*plain, failing, asked]}

    assert [done[job.job_id].status for job in plain] == [JobStatus.SUCCEEDED] * 3
    assert done[failing.job_id].status is JobStatus.FAILED
    assert done[asked.job_id].status is JobStatus.SUCCEEDED
    # The traces that are kept still are: the failure's and the requested one.
    assert "trace.zip" in {a.name for a in done[failing.job_id].artifacts}
    assert "trace.zip" in {a.name for a in done[asked.job_id].artifacts}
    assert not any(a.name == "trace.zip" for job in plain for a in done[job.job_id].artifacts)

    # Each trace is stopped before its job's outcome is written; the bound only absorbs a
    # context's close event still on its way.
    deadline = time.monotonic() + 15
    while _leftovers(driver_tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _leftovers(driver_tmp) == []
    running.stop()
