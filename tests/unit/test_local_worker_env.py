"""The local stack's workers run with the process environment the image and the task
definition give the worker (MALLOC_ARENA_MAX), under what a test or a bench sets."""

from __future__ import annotations

from pathlib import Path

from devstack.iam.local import LocalIam
from devstack.stack_workers import LocalWorkers
from pagefleet.specs.settings import WorkerSettings

SETTINGS = WorkerSettings(
    jobs_table="jobs",
    tenants_table="tenants",
    artifacts_bucket="artifacts",
    queue_urls={"standard": "-"},
    stage="local",
)


def test_a_local_worker_shares_two_malloc_arenas_as_the_deployed_one_does(tmp_path: Path) -> None:
    env = LocalWorkers(tmp_path, {}).environment(SETTINGS, LocalIam.off(), 0)
    assert env["MALLOC_ARENA_MAX"] == "2"
    assert env["PAGEFLEET_WORKER_ID"] == "local-worker-0"


def test_a_runs_own_setting_goes_over_it(tmp_path: Path) -> None:
    workers = LocalWorkers(tmp_path, {"MALLOC_ARENA_MAX": "16"})
    assert workers.environment(SETTINGS, LocalIam.off(), 1)["MALLOC_ARENA_MAX"] == "16"
    env = LocalWorkers(tmp_path, {}).environment(
        SETTINGS, LocalIam.off(), 1, {"MALLOC_ARENA_MAX": "8"}
    )
    assert env["MALLOC_ARENA_MAX"] == "8"
