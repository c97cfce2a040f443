"""Worker fixtures: a moto server on loopback, provisioned resources, a test site on
127.0.0.1 and an in-process worker (real Chromium) that stops cleanly.

Everything binds to 127.0.0.1; the browser is only ever pointed at pages served here.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from browser_task.__main__ import build_worker
from browser_task.slot.worker import Worker
from devstack.loopback import serve_on_loopback
from devstack.provision import Provisioned, create_all
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import WorkerSettings

TENANT = "tenant-a"


@pytest.fixture(scope="session")
def worker_moto_endpoint(moto_endpoint: str) -> str:
    """The session's moto server (tests/conftest.py), with atomic DynamoDB writes."""
    return moto_endpoint


def moto_env(endpoint: str, log_level: str = "WARNING") -> dict[str, str]:
    """What points boto3 at the moto server, with test credentials."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "POWERTOOLS_LOG_LEVEL": log_level,
    }


@pytest.fixture
def aws_env(worker_moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point boto3 (and pagefleet.aws's cached clients) at the moto server."""
    for key, value in moto_env(worker_moto_endpoint).items():
        monkeypatch.setenv(key, value)
    for name in list(__import__("os").environ):
        if name.startswith("PAGEFLEET_"):
            monkeypatch.delenv(name)
    RUNTIME.reset()
    yield worker_moto_endpoint
    RUNTIME.reset()


@pytest.fixture
def resources(aws_env: str) -> Provisioned:
    """A fresh set of tables, queues and bucket per test (unique name prefix)."""
    prefix = f"w{uuid.uuid4().hex[:8]}-"
    return create_all(
        boto3.client("dynamodb"), boto3.client("sqs"), boto3.client("s3"), prefix=prefix
    )


@pytest.fixture
def make_settings(resources: Provisioned) -> Callable[..., WorkerSettings]:
    def make(**overrides: Any) -> WorkerSettings:
        values: dict[str, Any] = {
            "jobs_table": resources.jobs_table,
            "tenants_table": resources.tenants_table,
            "artifacts_bucket": resources.artifacts_bucket,
            "queue_urls": resources.queue_urls,
            "allow_loopback": True,
            "poll_wait_seconds": 1,
            "heartbeat_seconds": 5,
            "drain_seconds": 5,
        }
        values.update(overrides)
        return WorkerSettings(**values)

    return make


@pytest.fixture
def settings(make_settings: Callable[..., WorkerSettings]) -> WorkerSettings:
    return make_settings()


@pytest.fixture
def services(settings: WorkerSettings) -> JobServices:
    return RUNTIME.job_services(settings)


# --- a small site on 127.0.0.1 -------------------------------------------------------------
@dataclass
class Site:
    base_url: str
    pages: dict[str, tuple[int, str]] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)

    def add(self, path: str, html: str, status: int = 200) -> str:
        self.pages[path] = (status, html)
        return self.url(path)

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"


@pytest.fixture
def site() -> Iterator[Site]:
    pages: dict[str, tuple[int, str]] = {}
    hits: dict[str, int] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            hits[path] = hits.get(path, 0) + 1
            status, body = pages.get(path, (404, "<h1>not found</h1>"))
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = serve_on_loopback(Handler, "test-site")
    try:
        yield Site(server.url, pages, hits)
    finally:
        server.stop()


# --- the worker, in-process ----------------------------------------------------------------
class RunningWorker:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="worker", daemon=True)

    def _main(self) -> None:
        try:
            asyncio.run(self.worker.run())
        except BaseException as exc:
            self.error = exc
            self.worker.ready.set()

    def start(self) -> RunningWorker:
        self._thread.start()
        assert self.worker.ready.wait(60), "worker did not start"
        if self.error is not None:
            raise self.error
        return self

    def stop(self, timeout: float = 60) -> None:
        self.worker.request_stop()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "worker did not stop"
        if self.error is not None:
            raise self.error


@pytest.fixture
def run_worker(
    settings: WorkerSettings, services: JobServices
) -> Iterator[Callable[..., RunningWorker]]:
    """Start a worker (stopped at teardown); kwargs go to ``build_worker``."""
    started: list[RunningWorker] = []

    def start(worker_settings: WorkerSettings | None = None, **kwargs: Any) -> RunningWorker:
        chosen = worker_settings or settings
        running = RunningWorker(build_worker(chosen, **kwargs)).start()
        started.append(running)
        return running

    yield start
    for running in started:
        with contextlib.suppress(AssertionError):
            running.stop()


# --- helpers -------------------------------------------------------------------------------
def submit(services: JobServices, request: JobRequest | dict[str, Any]) -> JobRecord:
    if isinstance(request, dict):
        request = JobRequest.model_validate(request)
    return submit_job(services, TENANT, request).job


def wait_for_job(
    services: JobServices,
    job_id: str,
    statuses: set[JobStatus] | None = None,
    *,
    timeout: float = 60,
) -> JobRecord:
    """Poll until the job reaches one of ``statuses`` (default: any final state)."""
    deadline = time.monotonic() + timeout
    while True:
        job = services.store.get(TENANT, job_id)
        done = job.status in statuses if statuses else job.status.is_final
        if done:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {job.status.value}: {job.error}")
        time.sleep(0.05)


def queue_counts(queue_url: str) -> tuple[int, int, int]:
    attrs = boto3.client("sqs").get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return (
        int(attrs["ApproximateNumberOfMessages"]),
        int(attrs["ApproximateNumberOfMessagesNotVisible"]),
        int(attrs["ApproximateNumberOfMessagesDelayed"]),
    )


def wait_for_empty_queue(queue_url: str, *, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while sum(queue_counts(queue_url)) != 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"queue still holds messages: {queue_counts(queue_url)}")
        time.sleep(0.1)
