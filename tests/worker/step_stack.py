"""One in-process worker (real Chromium) on a fresh set of moto resources, with a site of
pages on 127.0.0.1, for a module's jobs: the step e2e modules share it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from browser_task.__main__ import build_worker
from devstack.provision import create_all
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import WorkerSettings
from tests.worker.conftest import TENANT, RunningWorker, moto_env, submit, wait_for_job
from tests.worker.site_pages import Resource, StepSite, serve


@dataclass
class Stack:
    settings: WorkerSettings
    services: JobServices
    site: StepSite

    def run(self, request: dict[str, Any], timeout: float = 60) -> JobRecord:
        job = submit(self.services, request)
        return wait_for_job(self.services, job.job_id, timeout=timeout)

    def run_examples(self, names: tuple[str, ...]) -> dict[str, JobRecord]:
        """The named examples/workflows, each run against a demo site of its own."""
        from devstack.demo_site import DemoSite
        from devstack.examples import EXAMPLES_DIR, load_example

        demo = DemoSite().start()
        try:
            jobs = {
                name: submit(self.services, load_example(EXAMPLES_DIR / f"{name}.json", demo.url))
                for name in names
            }
            return {name: wait_for_job(self.services, job.job_id) for name, job in jobs.items()}
        finally:
            demo.stop()

    def artifact(self, job: JobRecord, name: str) -> bytes:
        found = next(a for a in job.artifacts if a.name == name)
        return self.services.artifacts.get(found.key)

    def events(self, job: JobRecord) -> list[dict[str, Any]]:
        """The job's run events as stored (all of them are written before its outcome)."""
        store = DynamoEventStore(RUNTIME.client("dynamodb"), self.settings.jobs_table)
        events, more = store.page(TENANT, job.job_id, after=0, limit=1000, now=int(time.time()))
        assert not more
        return events

    def tags(self, job: JobRecord, name: str) -> dict[str, str]:
        found = next(a for a in job.artifacts if a.name == name)
        tagging = boto3.client("s3").get_object_tagging(
            Bucket=self.settings.artifacts_bucket, Key=found.key
        )
        return {t["Key"]: t["Value"] for t in tagging["TagSet"]}


@contextmanager
def step_stack(
    endpoint: str, pages: dict[str, Resource], *, secrets: dict[str, str] | None = None
) -> Iterator[Stack]:
    """The stack for one module: ``pages`` served (the dict may change while it runs),
    ``secrets`` stored as the test tenant's."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in moto_env(endpoint, log_level="INFO").items():
            mp.setenv(key, value)
        RUNTIME.reset()
        prefix = f"s{uuid.uuid4().hex[:8]}-"
        res = create_all(
            boto3.client("dynamodb"), boto3.client("sqs"), boto3.client("s3"), prefix=prefix
        )
        settings = WorkerSettings(
            jobs_table=res.jobs_table,
            tenants_table=res.tenants_table,
            artifacts_bucket=res.artifacts_bucket,
            queue_urls=res.queue_urls,
            allow_loopback=True,
            poll_wait_seconds=1,
            heartbeat_seconds=5,
            drain_seconds=5,
            stage="test",
            max_artifact_bytes=2 * 1024 * 1024,
        )
        services = RUNTIME.job_services(settings)
        for name, value in (secrets or {}).items():
            boto3.client("secretsmanager").create_secret(
                Name=f"pagefleet/test/{TENANT}/{name}", SecretString=value
            )
        with serve(pages) as site:
            running = RunningWorker(build_worker(settings)).start()
            try:
                yield Stack(settings, services, site)
            finally:
                running.stop()
        RUNTIME.reset()
