"""Run events from a real worker and Chromium: what a job reports, masked, and its retries."""

from __future__ import annotations

import html
import http.server
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devstack.fakes import FakeSecrets
from devstack.loopback import serve_on_loopback
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.jobs.service import JobServices
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import WorkerSettings
from pagefleet.workflow.masking import encoded_forms

from .conftest import TENANT, RunningWorker, submit, wait_for_job

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SECRET = "hunter2-s3cret"


@pytest.fixture
def pages() -> Iterator[str]:
    """/form echoes what is typed to the console and throws; /flaky answers 503 once."""
    hits: dict[str, int] = {}
    form = b"""<!doctype html><title>form</title><input id=pw>
      <script>
        document.getElementById('pw').addEventListener('input',
          e => console.warn('typed ' + e.target.value));
        console.log('page ready');
        setTimeout(() => { throw new Error('boom in the page'); }, 0);
      </script>"""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            hits[path] = hits.get(path, 0) + 1
            status = 503 if path == "/flaky" and hits[path] == 1 else 200
            body = form if path == "/form" else b"<h1>ok</h1>"
            if path == "/search":  # a form GET: the browser puts the field into the URL
                body = b"<form action=/echo><input name=q id=q><button id=go>go</button></form>"
            if path == "/echo":  # the query as the browser sent it, in the title and the page
                raw = html.escape(self.path.partition("?")[2]).encode()
                body = b"<title>" + raw + b"</title><h1 id=echo>" + raw + b"</h1>"
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = serve_on_loopback(Handler, "events-pages")
    try:
        yield server.url
    finally:
        server.stop()


def stored_events(settings: WorkerSettings, job_id: str) -> list[dict[str, Any]]:
    store = DynamoEventStore(RUNTIME.client("dynamodb"), settings.jobs_table)
    events, more = store.page(TENANT, job_id, after=0, limit=1000, now=int(time.time()))
    assert not more
    return events


def test_a_job_reports_steps_navigations_console_and_errors_with_secrets_masked(
    settings: WorkerSettings,
    services: JobServices,
    run_worker: Callable[..., RunningWorker],
    pages: str,
) -> None:
    run_worker(secrets_resolver=FakeSecrets({(TENANT, "PASSWORD"): SECRET}))
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": pages + "/form?token={{secrets.PASSWORD}}"},
                {"action": "fill", "selector": "#pw", "value": "{{secrets.PASSWORD}}"},
                {"action": "sleep", "ms": 200},
            ],
            "options": {"capture_console": True},
        },
    )
    done = wait_for_job(services, job.job_id)
    assert done.status.value == "succeeded", done.error
    events = stored_events(settings, job.job_id)
    assert SECRET not in json.dumps(events)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "state" and events[0]["status"] == "running"
    assert kinds[-1] == "state" and events[-1]["status"] == "succeeded"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    (navigation,) = [e for e in events if e["type"] == "navigation"]
    assert navigation["url"].endswith("/form?token=***")
    console = [e for e in events if e["type"] == "console"]
    assert {"level": "log", "message": "page ready"}.items() <= console[0].items()
    assert any(e["level"] == "warning" and e["message"] == "typed ***" for e in console)
    errors = [e for e in events if e["type"] == "page_error"]
    assert errors and "boom in the page" in errors[0]["message"]
    steps = [(e["type"], e["index"], e.get("outcome")) for e in events if "index" in e]
    assert steps == [
        ("step_started", 0, None),
        ("step_finished", 0, "ok"),
        ("step_started", 1, None),
        ("step_finished", 1, "ok"),
        ("step_started", 2, None),
        ("step_finished", 2, "ok"),
    ]
    fill = next(e for e in events if e["type"] == "step_started" and e["index"] == 1)
    assert fill["action"] == "fill" and fill["of"] == 3
    assert "{{secrets.PASSWORD}}" in fill["label"]  # the step as written, never its value
    assert any(e["type"] == "log" and e["message"].startswith("job started") for e in events)


def test_a_retry_is_reported_with_its_reason_and_the_next_attempt_continues(
    settings: WorkerSettings,
    services: JobServices,
    run_worker: Callable[..., RunningWorker],
    pages: str,
) -> None:
    run_worker()
    job = submit(
        services,
        {
            "steps": [{"action": "goto", "url": pages + "/flaky"}],
            "retry": {"base_seconds": 0.5, "cap_seconds": 1},
        },
    )
    done = wait_for_job(services, job.job_id)
    assert done.status.value == "succeeded" and done.attempt == 2
    events = stored_events(settings, job.job_id)
    (retry,) = [e for e in events if e["type"] == "retry"]
    assert retry["attempt"] == 1 and retry["kind"] == "target_unavailable"
    assert "503" in retry["reason"] and retry["delay_s"] >= 0
    states = [(e["attempt"], e["status"]) for e in events if e["type"] == "state"]
    assert states == [(1, "running"), (1, "retry_scheduled"), (2, "running"), (2, "succeeded")]
    # Numbers only increase; each attempt's follow on from each other, and the next attempt
    # starts past what the first reserved and left (a gap the events route skips).
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1
    for attempt in (1, 2):
        own = [e["seq"] for e in events if e["attempt"] == attempt]
        assert own == list(range(own[0], own[0] + len(own)))


def test_no_capture_console_no_console_events(
    settings: WorkerSettings,
    services: JobServices,
    run_worker: Callable[..., RunningWorker],
    pages: str,
) -> None:
    run_worker()
    job = submit(services, {"steps": [{"action": "goto", "url": pages + "/form"}]})
    assert wait_for_job(services, job.job_id).status.value == "succeeded"
    kinds = {e["type"] for e in stored_events(settings, job.job_id)}
    assert "console" not in kinds and "page_error" not in kinds and "navigation" in kinds


ODD_SECRET = "p@ss w&rd+%é~*"


def test_a_secrets_url_encoded_forms_are_masked_in_events_and_results(
    settings: WorkerSettings,
    services: JobServices,
    run_worker: Callable[..., RunningWorker],
    pages: str,
) -> None:
    """A secret in a goto's query, and typed into a form a GET submits, reaches the page's
    URL, title and text percent-encoded (``+`` for the form's spaces): none of those forms is
    stored, as the exact value is not."""
    run_worker(secrets_resolver=FakeSecrets({(TENANT, "PASSWORD"): ODD_SECRET}))
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": pages + "/echo?token={{secrets.PASSWORD}}"},
                {"action": "extract", "name": "typed_url", "selector": "#echo"},
                {"action": "goto", "url": pages + "/search"},
                {"action": "fill", "selector": "#q", "value": "{{secrets.PASSWORD}}"},
                {"action": "click", "selector": "#go"},
                {"action": "wait_for", "selector": "#echo"},
                {"action": "extract", "name": "form_query", "selector": "#echo"},
            ]
        },
    )
    done = wait_for_job(services, job.job_id)
    assert done.status.value == "succeeded", done.error
    # The page declares no charset: its form sends the secret's windows-1252 bytes.
    assert done.result == {"typed_url": "token=***", "form_query": "q=***"}
    stored = json.dumps([stored_events(settings, job.job_id), done.result], ensure_ascii=False)
    leaked = [form for form in encoded_forms(ODD_SECRET) if form in stored]
    assert leaked == [], leaked
    navigations = [
        e["url"] for e in stored_events(settings, job.job_id) if e["type"] == "navigation"
    ]
    assert navigations[-1].endswith("/echo?q=***"), navigations
