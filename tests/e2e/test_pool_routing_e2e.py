"""Jobs routed to a pool run on that pool's workers: the shared local stack runs every
declared pool (a small worker for each beyond the standard one), so a job that names its
pool or asks for what only one pool has is run, in real Chromium against the demo site on
127.0.0.1, by a worker of that pool and no other."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.stack import LocalStack
from pagefleet.client import PagefleetClient
from pagefleet.jobs.states import JobStatus

pytestmark = [pytest.mark.e2e]


def test_jobs_run_on_the_workers_of_the_pool_they_name_or_require(
    stack: LocalStack, client: PagefleetClient
) -> None:
    steps = [
        {"action": "goto", "url": stack.site_url + "/"},
        {"action": "extract", "name": "title", "selector": "h1"},
    ]
    asked: dict[str, dict[str, Any]] = {
        "standard": {},
        "heavy": {"pool": "heavy"},
        # Only heavy has isolation "task" (one job per task, a fresh browser per job).
        "routed": {"requires": {"isolation": "task"}},
    }
    jobs = {
        name: client.submit({"steps": steps, "max_attempts": 1, **extra})
        for name, extra in asked.items()
    }
    pools = stack.worker_pools
    assert sorted(set(pools.values())) == ["heavy", "standard"]
    ran_on = {}
    for name, submitted in jobs.items():
        done = client.wait(submitted.job_id, timeout=180)
        assert done.status is JobStatus.SUCCEEDED, (name, done.error)
        assert done.result is not None and done.result["title"]
        ran_on[name] = (done.pool, pools[done.attempts[-1].worker])
    assert ran_on == {
        "standard": ("standard", "standard"),
        "heavy": ("heavy", "heavy"),
        "routed": ("heavy", "heavy"),
    }
