"""The example price watcher on a local stack: its schedule, the shop's states, its runs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from pagefleet.client import Job, PagefleetClient
from pagefleet.jobs.states import JobStatus

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "monitors"
T = TypeVar("T")


def watcher_spec(site_url: str, **extra: Any) -> dict[str, Any]:
    """The example schedule against ``site_url``, paused (only runs started by hand)."""
    spec: dict[str, Any] = json.loads((EXAMPLE / "price-watcher.schedule.json").read_text())
    spec["job"]["inputs"]["site"] = site_url
    spec["enabled"] = False
    spec.update(extra)
    return spec


def set_shop(site_url: str, state_file: str | None, **state: Any) -> None:
    """The shop as ``state_file`` (in examples/monitors) says, or as it starts (None)."""
    if state_file is None and not state:
        assert httpx.post(f"{site_url}/watch/reset").status_code == 200
        return
    body = json.loads((EXAMPLE / state_file).read_text()) if state_file else {}
    body.update(state)
    assert httpx.put(f"{site_url}/watch/state", json=body).status_code == 200


def until(what: str, check: Callable[[], T | None], timeout: float = 90) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.25)


def run_now(client: PagefleetClient, schedule_id: str) -> Job:
    """One successful run, to its end and counted into the schedule's health (the stream
    reader does that a moment after the run ends): the next run compares with it."""
    job = client.wait(client.run_schedule(schedule_id).job_id, timeout=180)
    assert job.status is JobStatus.SUCCEEDED, job.error
    until(
        f"run {job.job_id} counted",
        lambda: client.schedule(schedule_id).last_success_job_id == job.job_id,
    )
    return job
