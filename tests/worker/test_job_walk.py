"""A job's way through the worker is downhill (issue 31): from ``JobRunner.run``'s entry its
plan is made once (steps rendered, secrets resolved), and from the first step on nothing is
rendered, resolved or prepared again; before it, the run climbs back into no stage it left.

Followed with the walk ``bench/job_walk.py`` prints (a profile hook on the worker's thread),
on a job whose steps take an input and a secret in every step after the first.
"""

from __future__ import annotations

import asyncio
import sys
import threading

from bench.job_walk import Walk, climbs_to_first_step, stops_to_first_step
from browser_task.__main__ import build_worker
from devstack.fakes import FakeSecrets
from pagefleet.jobs.service import JobServices
from pagefleet.specs.settings import WorkerSettings

from .conftest import TENANT, Site, submit, wait_for_job

SECRET = "s3cr3t-walk-value"


def test_nothing_is_rendered_or_resolved_after_the_plan(
    settings: WorkerSettings, services: JobServices, site: Site
) -> None:
    page = site.add("/walk", "<html><body><input id='q'><p id='t'>walked</p></body></html>")
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": "{{inputs.page}}?k={{secrets.TOKEN}}"},
                {"action": "fill", "selector": "#q", "value": "{{secrets.TOKEN}} {{job.id}}"},
                {"action": "extract", "name": "t", "selector": "#t"},
                {"action": "goto", "url": "{{inputs.page}}?again={{inputs.word}}"},
            ],
            "inputs": {"page": page, "word": "twice"},
        },
    )
    walk = Walk(job.job_id)
    worker = build_worker(settings, secrets_resolver=FakeSecrets({(TENANT, "TOKEN"): SECRET}))

    def serve() -> None:
        walk.thread = threading.get_ident()
        sys.setprofile(walk)
        try:
            asyncio.run(worker.run())
        finally:
            sys.setprofile(None)

    thread = threading.Thread(target=serve, name="walked-worker", daemon=True)
    thread.start()
    try:
        done = wait_for_job(services, job.job_id, timeout=120)
    finally:
        worker.request_stop()
        thread.join(60)
    assert not thread.is_alive(), "worker did not stop"
    assert done.status.value == "succeeded", done.error
    assert done.result == {"t": "walked"}

    assert walk.at_first_step is not None, "the walk never reached a step's handler"
    assert walk.templating_after_plan == 0, "a step was rendered after the plan"
    assert walk.prepare_after_plan == 0, "the run went back to its preparation"
    assert climbs_to_first_step(walk) == []
    print(f"stops to the first step: {stops_to_first_step(walk)}")  # the goal: docs/performance.md
