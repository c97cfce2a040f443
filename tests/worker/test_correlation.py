"""One correlation id follows a job: the API's log record, the worker's log lines (same JSON
shape and key names) and the artifact's S3 object metadata."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from devstack.provision import Provisioned
from pagefleet.jobs.service import JobServices
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import WorkerSettings
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import ApiCaller
from tests.worker.conftest import TENANT, RunningWorker, Site, wait_for_job

SHARED_KEYS = {"level", "location", "message", "timestamp", "service", "correlation_id"}


class Lines(logging.Handler):
    def __init__(self, powertools_logger: Any) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(powertools_logger.registered_formatter)
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


def test_one_correlation_id_from_api_to_worker_logs_to_artifact_metadata(
    resources: Provisioned,
    settings: WorkerSettings,
    services: JobServices,
    run_worker: Callable[..., RunningWorker],
    site: Site,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from browser_task.observe.telemetry import logger as worker_logger
    from functions.api.context import logger as api_logger

    # The API handler reads the same resources the worker uses.
    for name, value in {
        "PAGEFLEET_JOBS_TABLE": resources.jobs_table,
        "PAGEFLEET_TENANTS_TABLE": resources.tenants_table,
        "PAGEFLEET_ARTIFACTS_BUCKET": resources.artifacts_bucket,
        "PAGEFLEET_QUEUE_URLS": json.dumps(resources.queue_urls),
    }.items():
        monkeypatch.setenv(name, value)
    RUNTIME.reset()
    api_lines, worker_lines = Lines(api_logger), Lines(worker_logger)
    api_logger.addHandler(api_lines)
    worker_logger.addHandler(worker_lines)
    level = worker_logger.log_level
    worker_logger.setLevel(logging.INFO)
    try:
        key, _ = create_api_key(RUNTIME.tenant_store(resources.tenants_table), TENANT)
        url = site.add("/page.html", "<h1>correlated</h1>")
        workflow = {
            "steps": [
                {"action": "goto", "url": url},
                {"action": "extract", "name": "title", "selector": "h1"},
            ]
        }
        resp = ApiCaller(key).post_job(workflow, headers={"X-Correlation-Id": "corr-e2e-1"})
        assert resp.status == 202, resp.body
        job_id = resp.body["job_id"]
        worker = run_worker()
        done = wait_for_job(services, job_id)
        worker.stop()  # every line of the job is logged once the worker has stopped
    finally:
        api_logger.removeHandler(api_lines)
        worker_logger.removeHandler(worker_lines)
        worker_logger.setLevel(level)

    assert done.status.value == "succeeded", done.error
    assert done.correlation_id == "corr-e2e-1"
    [api_line] = [r for r in api_lines.lines if r.get("job_id") == job_id]
    job_lines = [r for r in worker_lines.lines if r.get("job_id") == job_id]
    assert {r["message"] for r in job_lines} >= {"job started", "job finished"}
    for line in [api_line, *job_lines]:
        assert SHARED_KEYS <= set(line), line
        assert line["correlation_id"] == "corr-e2e-1"
        assert line["tenant_id"] == TENANT
    [data] = [a for a in done.artifacts if a.name == "data.json"]
    head = boto3.client("s3").head_object(Bucket=resources.artifacts_bucket, Key=data.key)
    assert head["Metadata"]["correlation-id"] == "corr-e2e-1"
