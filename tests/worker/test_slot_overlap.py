"""A slot's next job does not wait for the last one's uploads (moto server, real Chromium).

With one slot, a job whose artifact upload is held back must not hold back the next job:
the slot is free once the browser context is closed. The held job's outcome is written
only when its uploads are in, with its artifacts."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from browser_task.tenant.access import tenant_data_source
from pagefleet.jobs.ports import ArtifactStore
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from tests.worker.conftest import TENANT, submit, wait_for_job

pytestmark = pytest.mark.e2e


class HeldUploads:
    """The artifact store, with one job's uploads held until the test lets them go."""

    def __init__(self, store: ArtifactStore, job_id: str) -> None:
        self._store = store
        self.job_id = job_id
        self.release = threading.Event()
        self.held = threading.Event()

    def put(self, **kwargs: Any) -> Any:
        if kwargs["job_id"] == self.job_id:
            self.held.set()
            assert self.release.wait(120), "the test never let the upload go"
        return self._store.put(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_the_next_job_starts_while_the_last_ones_uploads_finish(
    site, services, make_settings, run_worker
):
    url = site.add("/shot", "<h1>shot</h1>")
    steps = [{"action": "goto", "url": url}, {"action": "screenshot", "name": "page"}]
    first = submit(services, {"steps": steps})
    second = submit(
        services, {"steps": [*steps, {"action": "extract", "name": "h", "selector": "h1"}]}
    )
    settings = make_settings(concurrency=1)
    held = HeldUploads(services.artifacts, first.job_id)
    data = tenant_data_source(
        settings, artifacts=held, session_ttl_s=lambda tenant: 3600, client=RUNTIME.client
    )
    run_worker(settings, tenant_data=data)
    try:
        assert held.held.wait(60), "the first job never uploaded"
        # One slot, and the first job's upload is still held: the second runs anyway.
        running = wait_for_job(
            services, second.job_id, {JobStatus.RUNNING, JobStatus.SUCCEEDED}, timeout=60
        )
        # Its outcome waits for its uploads.
        assert services.store.get(TENANT, first.job_id).status is JobStatus.RUNNING
    finally:
        held.release.set()
    done_first = wait_for_job(services, first.job_id)
    done_second = wait_for_job(services, second.job_id)
    assert running.started_at is not None
    assert (done_first.status, done_second.status) == (JobStatus.SUCCEEDED, JobStatus.SUCCEEDED)
    assert [a.name for a in done_first.artifacts] == ["page.png"]
    assert done_second.result == {"h": "shot"}
    assert done_first.finished_at is not None and done_first.finished_at > running.started_at


def test_a_stopping_worker_lets_the_last_uploads_finish_and_writes_the_outcome(
    site, services, make_settings, run_worker
):
    """Scale-in while a job's upload is still going: the job is not handed back or lost;
    its uploads finish and its outcome is written before the worker stops."""
    url = site.add("/last", "<h1>last</h1>")
    job = submit(
        services,
        {"steps": [{"action": "goto", "url": url}, {"action": "screenshot", "name": "last"}]},
    )
    settings = make_settings(concurrency=1, drain_seconds=60)
    held = HeldUploads(services.artifacts, job.job_id)
    data = tenant_data_source(
        settings, artifacts=held, session_ttl_s=lambda tenant: 3600, client=RUNTIME.client
    )
    running = run_worker(settings, tenant_data=data)
    assert held.held.wait(60), "the job never uploaded"
    stopper = threading.Thread(target=running.stop, daemon=True)
    stopper.start()
    # The stop has begun (the slot is free, so only the upload holds the worker up).
    while not running.worker._stop_flag.is_set():
        stopper.join(0.05)
    assert stopper.is_alive(), "the worker stopped without waiting for the upload"
    held.release.set()
    stopper.join(60)
    assert not stopper.is_alive(), "the worker did not stop after the upload finished"
    done = services.store.get(TENANT, job.job_id)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert [a.name for a in done.artifacts] == ["last.png"]
