"""The modules one job id passes through, from ``POST /v1/jobs`` to the worker's outcome.

    .venv/bin/python bench/job_path.py

One process, everything on 127.0.0.1: a moto server, the API handler invoked with an API
Gateway REST event, a worker (real Chromium) built by its entry point, a page to run
against. A profile hook on every thread looks at each call into a module of ``pagefleet``,
``functions`` or ``browser_task``: when the frame's locals (at the call and at its return,
with the returned value) hold the job's id — the id itself, a string containing it, or an
object, list or dict holding one of those (two levels deep) — the module is counted. A
module that only carries the job's request before its id exists (the route's parsing, the
authorizer) is not. Prints the modules of the API's side, the worker's, and the count of
both together (a module on both sides counts once).

Prints figures; asserts nothing.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402

from bench.common import Measured  # noqa: E402
from devstack.constants import aws_env  # noqa: E402
from devstack.loopback import serve_on_loopback  # noqa: E402
from devstack.provision import create_all  # noqa: E402

OURS = tuple(f"{ROOT / name}{os.sep}" for name in ("pagefleet", "functions", "browser_task"))
TENANT = "bench-tenant"


class Tracer:
    def __init__(self) -> None:
        self.job_id: str | None = None
        self.side = "api"
        self.seen: dict[str, set[str]] = {"api": set(), "worker": set()}

    def holds(self, value: Any, depth: int = 0) -> bool:
        assert self.job_id is not None
        if isinstance(value, str):
            return self.job_id in value
        if value is None or isinstance(value, int | float | bytes) or depth > 1:
            return False
        try:
            if isinstance(value, dict):
                values = list(value.values())
            elif isinstance(value, list | tuple | set | frozenset):
                values = list(value)
            else:
                values = list(vars(value).values())
        except TypeError:  # no __dict__ (slots, builtins)
            return False
        return any(self.holds(v, depth + 1) for v in values[:50])

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.job_id is None or event not in ("call", "return"):
            return
        if not frame.f_code.co_filename.startswith(OURS):
            return
        module = str(frame.f_globals.get("__name__", "?"))
        if module in self.seen[self.side]:
            return
        values = [*frame.f_locals.values(), arg] if event == "return" else frame.f_locals.values()
        if any(self.holds(v) for v in values):
            self.seen[self.side].add(module)

    def start(self) -> None:
        threading.setprofile(self)
        sys.setprofile(self)

    def stop(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


def site() -> str:
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<h1>a page</h1>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return f"{serve_on_loopback(Page, 'job-path-site').url}/"


def submit_event(url: str) -> dict[str, Any]:
    from devstack.gateway import HttpRequest, proxy_resource, rest_event

    body = {
        "max_attempts": 1,
        "steps": [
            {"action": "goto", "url": url},
            {"action": "extract", "name": "title", "selector": "h1"},
        ],
    }
    request = HttpRequest(
        method="POST",
        raw_path="/jobs",
        headers=[("Content-Type", "application/json"), ("Host", "127.0.0.1")],
        body=json.dumps(body).encode(),
    )
    resource, params = proxy_resource(request.path)
    return rest_event(
        request,
        resource=resource,
        path_parameters=params,
        authorizer={"tenant_id": TENANT, "admin": "false", "principalId": TENANT},
        api_id="local",
        stage="v1",
        request_id=str(uuid.uuid4()),
    )


def main() -> int:
    stop = start_local_aws("path")
    try:
        return traced(submit_event(site()))
    finally:
        stop()


def start_local_aws(prefix: str) -> Callable[[], None]:
    """A moto server on loopback with the platform's resources, the environment pointed at
    it (as the local stack does: conditional writes are atomic); returns its stop."""
    from moto.server import ThreadedMotoServer

    from devstack.embedded_aws import prepare_moto

    prepare_moto()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    os.environ.update(aws_env(f"http://127.0.0.1:{port}"))
    os.environ["POWERTOOLS_LOG_LEVEL"] = "WARNING"
    made = create_all(
        boto3.client("dynamodb"),
        boto3.client("sqs"),
        boto3.client("s3"),
        prefix=f"{prefix}{uuid.uuid4().hex[:6]}-",
    )
    os.environ.update(
        {
            "PAGEFLEET_JOBS_TABLE": made.jobs_table,
            "PAGEFLEET_TENANTS_TABLE": made.tenants_table,
            "PAGEFLEET_ARTIFACTS_BUCKET": made.artifacts_bucket,
            "PAGEFLEET_QUEUE_URLS": json.dumps(made.queue_urls),
            "PAGEFLEET_ALLOW_LOOPBACK": "true",
            "PAGEFLEET_POLL_WAIT_SECONDS": "1",
            "PAGEFLEET_DRAIN_SECONDS": "5",
        }
    )
    return server.stop


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def traced(event: dict[str, Any]) -> int:
    from browser_task.__main__ import build_worker
    from functions.api.handler import handler
    from pagefleet.jobs import models, planning
    from pagefleet.specs.settings import WorkerSettings

    handler(event, None)  # a first submission, untraced: first imports and connections
    tracer = Tracer()
    tracer.job_id = job_id = models.new_job_id()
    # The id is made inside the submission: this one is known before it starts.
    planning.new_job_id = lambda: job_id
    tracer.start()
    answer = handler(event, None)
    tracer.stop()
    if answer["statusCode"] != 202 or json.loads(answer["body"])["job_id"] != job_id:
        print(f"submit failed: {answer['statusCode']} {answer['body'][:200]}")
        return 1
    tracer.side = "worker"
    worker = build_worker(WorkerSettings())
    stopped = threading.Event()

    def serve() -> None:
        sys.setprofile(tracer)
        try:
            asyncio.run(worker.run())
        finally:
            stopped.set()

    tracer.start()
    threading.Thread(target=serve, name="worker", daemon=True).start()
    store = worker.lifecycle.store
    deadline = time.monotonic() + 300
    while not store.get(TENANT, job_id).status.is_final and time.monotonic() < deadline:
        time.sleep(0.2)
    worker.request_stop()  # the drain waits for the outcome's write
    stopped.wait(120)
    tracer.stop()
    print(f"job {job_id}: {store.get(TENANT, job_id).status.value}")
    for side, modules in tracer.seen.items():
        print(f"{side}: {len(modules)} modules")
        for module in sorted(modules):
            print(f"    {module}")
    print(f"together: {len(tracer.seen['api'] | tracer.seen['worker'])} modules")
    return 0


if __name__ == "__main__":
    with Measured("bench/job_path.py"):
        code = main()
    sys.exit(code)
