"""What a worker loads before its first job: not the parts only some jobs use (issue 36).

A browser session's loop, a takeover's input, a monitor's schedules, the WebSocket API's
live service and the libraries of URL globs and result schemas are loaded by
the first job that needs them; a worker that never runs one never holds them. Each case
imports ``browser_task.__main__`` in a fresh interpreter and builds a worker against an
endpoint that answers nothing (building makes no AWS call).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from browser_task.tenant.access import tenant_data_source
from devstack.fakes import FakeArtifactStore
from pagefleet.adapters.dynamodb.session_commands import DynamoCommandLedger
from pagefleet.adapters.dynamodb.takeover_inputs import DynamoTakeoverInputs
from pagefleet.specs.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
ONLY_SOME_JOBS = (
    # a browser session's: its loop, answers, observations and their diff, its ledger
    "browser_task.run.session_loop",
    "browser_task.run.session_parts",
    "browser_task.run.observation",
    "browser_task.observe.aria_view",
    "difflib",
    "pagefleet.browsing.models",
    "pagefleet.browsing.commands",
    "pagefleet.adapters.dynamodb.session_commands",
    # a taken-over job's input
    "browser_task.run.takeover_input",
    "pagefleet.browsing.input_events",
    "pagefleet.adapters.dynamodb.takeover_inputs",
    # a monitor's schedule (its baseline)
    "pagefleet.schedules.service",
    "pagefleet.schedules.expressions",
    "pagefleet.adapters.dynamodb.schedules",
    "cronsim",
    # the WebSocket API's side of the live view (the worker only posts frames)
    "pagefleet.live.watch",
    "pagefleet.live.service",
    "pagefleet.tenancy.api_keys",
    # a job's URL globs and patterns (the extension allocates ~10 MB as it loads), a result's
    # JSON Schema
    "regex",
    "jsonschema",
)
PROBE = """
import json, sys
import browser_task.__main__ as main
imported = [name for name in sys.argv[1:] if name in sys.modules]
from pagefleet.specs.settings import WorkerSettings
queue = "http://127.0.0.1:9/000000000000/q"
settings = WorkerSettings(
    jobs_table="jobs",
    tenants_table="tenants",
    artifacts_bucket="artifacts",
    queue_urls={"standard": queue, "standard-high": queue, "standard-low": queue},
    stage="local",
    allow_loopback=True,
)
main.build_worker(settings)
built = [name for name in sys.argv[1:] if name in sys.modules]
print(json.dumps({"imported": imported, "built": built}))
"""


def worker_start() -> dict[str, list[str]]:
    """Which of ``ONLY_SOME_JOBS`` a fresh worker loaded on import and after its build."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAGEFLEET_", "AWS_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        AWS_ENDPOINT_URL="http://127.0.0.1:9",  # nothing listens: any call would fail
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *ONLY_SOME_JOBS],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    report: dict[str, list[str]] = json.loads(out.stdout.strip().splitlines()[-1])
    return report


def test_a_worker_loads_no_part_that_only_some_jobs_use_until_one_does() -> None:
    report = worker_start()
    assert report["imported"] == [], "imported by browser_task.__main__"
    assert report["built"] == [], "loaded by build_worker"


def test_a_tenants_session_ledger_and_takeover_inputs_are_made_when_asked_for() -> None:
    settings = WorkerSettings(
        jobs_table="jobs",
        tenants_table="tenants",
        artifacts_bucket="artifacts",
        queue_urls={"standard": "-"},
        stage="local",
    )
    source = tenant_data_source(
        settings,
        artifacts=FakeArtifactStore(),
        session_ttl_s=lambda _: 60,
        client=lambda service: object(),
    )
    data = source("t1")
    assert data.commands is not None and data.inputs is not None
    assert isinstance(data.commands(), DynamoCommandLedger)
    assert isinstance(data.inputs(), DynamoTakeoverInputs)
