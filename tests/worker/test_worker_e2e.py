"""The worker end to end: moto server, real Chromium, pages on 127.0.0.1."""

from __future__ import annotations

import hashlib
import time

import boto3
import pytest

from devstack.fakes import FakeSecrets
from pagefleet.jobs.record import JobMessage
from pagefleet.jobs.states import JobStatus
from pagefleet.tenancy.spend import cost_usd
from tests.worker.conftest import (
    TENANT,
    queue_counts,
    submit,
    wait_for_empty_queue,
    wait_for_job,
)

pytestmark = pytest.mark.e2e

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

FORM_PAGE = """<!doctype html>
<html><head><title>Shop</title></head><body>
  <h1 id="title">  Hello shop  </h1>
  <ul><li><a class="item" href="/a">A</a></li><li><a class="item" href="/b">B</a></li></ul>
  <input id="q"><button id="go">Search</button>
  <p id="out"></p>
  <script>
    document.getElementById('go').addEventListener('click', () => {
      setTimeout(() => {
        const p = document.createElement('p');
        p.id = 'result';
        p.textContent = 'You searched ' + document.getElementById('q').value;
        document.body.appendChild(p);
      }, 50);
    });
  </script>
</body></html>"""


def test_job_succeeds_with_extracted_values_and_screenshot(site, services, settings, run_worker):
    url = site.add("/shop", FORM_PAGE)
    job = submit(
        services,
        {
            "inputs": {"query": "red shoes"},
            "steps": [
                {"action": "goto", "url": url},
                {"action": "fill", "selector": "#q", "value": "{{inputs.query}}"},
                {"action": "click", "selector": "#go"},
                {"action": "wait_for", "selector": "#result"},
                {"action": "extract", "name": "title", "selector": "#title"},
                {"action": "extract", "name": "searched", "selector": "#result"},
                {
                    "action": "extract",
                    "name": "links",
                    "selector": "a.item",
                    "kind": "attribute",
                    "attribute": "href",
                    "many": True,
                },
                {"action": "screenshot", "name": "page"},
            ],
        },
    )
    run_worker()
    done = wait_for_job(services, job.job_id)

    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {
        "title": "Hello shop",
        "searched": "You searched red shoes",
        "links": ["/a", "/b"],
    }
    assert done.attempt == 1
    assert [a.status for a in done.attempts] == [JobStatus.SUCCEEDED]
    assert done.lease_owner is None

    # data.json holds the extracted result as an artifact too.
    assert sorted(a.name for a in done.artifacts) == ["data.json", "page.png"]
    shot = next(a for a in done.artifacts if a.name == "page.png")
    assert shot.content_type == "image/png"
    assert shot.key == f"{TENANT}/{job.job_id}/1/page.png"
    body = boto3.client("s3").get_object(Bucket=settings.artifacts_bucket, Key=shot.key)
    data = body["Body"].read()
    assert data.startswith(PNG_SIGNATURE)
    assert hashlib.sha256(data).hexdigest() == shot.sha256
    assert len(data) == shot.size
    wait_for_empty_queue(settings.queue_url("standard"))


def test_selector_that_never_appears_fails_with_step_and_action_timeout(site, services, run_worker):
    url = site.add("/plain", "<h1>nothing to see</h1>")
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": url},
                {"action": "wait_for", "selector": "#never", "timeout_ms": 300},
                {"action": "extract", "name": "x", "selector": "h1"},
            ],
        },
    )
    run_worker()
    done = wait_for_job(services, job.job_id)

    assert done.status is JobStatus.FAILED
    error = done.error
    assert error is not None
    assert error.kind == "step_failed"
    assert error.step_index == 1
    assert error.timeout == "action"
    assert error.retryable is False
    assert "#never" in error.message
    assert "300 ms" in error.message
    assert error.step is not None and error.step.startswith("wait_for(")
    assert done.attempts[-1].error == error
    # A debug snapshot of the page as it was when the step failed.
    failure = [a for a in done.artifacts if a.name == "failure.png"]
    assert failure and failure[0].retention == "debug"


def test_job_timeout_is_enforced_from_outside_the_page(site, services, run_worker):
    url = site.add("/slow", "<h1>waiting forever</h1>")
    job = submit(
        services,
        {
            "options": {"job_timeout_s": 1},
            "steps": [
                {"action": "goto", "url": url},
                {"action": "wait_for", "selector": "#never", "timeout_ms": 120_000},
            ],
        },
    )
    run_worker()
    done = wait_for_job(services, job.job_id)

    assert done.status is JobStatus.TIMED_OUT
    assert done.error is not None
    assert done.error.timeout == "job"
    assert done.error.step_index == 1


def test_duplicate_delivery_runs_the_job_once(site, services, settings, run_worker):
    url = site.add("/once", "<h1>once</h1>")
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": url},
                {"action": "extract", "name": "h", "selector": "h1"},
            ]
        },
    )
    duplicate = JobMessage(
        tenant_id=TENANT,
        job_id=job.job_id,
        attempt=0,
        correlation_id=job.correlation_id,
        pool="standard",
    )
    services.queue.send(duplicate)  # two copies in the queue before any worker runs
    running = run_worker()
    done = wait_for_job(services, job.job_id)
    wait_for_empty_queue(settings.queue_url("standard"))

    assert done.status is JobStatus.SUCCEEDED
    assert done.attempt == 1
    assert len(done.attempts) == 1
    assert site.hits["/once"] == 1

    # A late duplicate after the job finished changes nothing either.
    handled = running.worker.jobs_handled
    services.queue.send(duplicate)
    wait_for_empty_queue(settings.queue_url("standard"))
    after = services.store.get(TENANT, job.job_id)
    assert after == done
    assert running.worker.jobs_handled == handled
    assert site.hits["/once"] == 1


def test_target_5xx_is_retried_then_fails_when_attempts_run_out(site, services, run_worker):
    url = site.add("/down", "<h1>maintenance</h1>", status=503)
    job = submit(
        services,
        {"max_attempts": 2, "steps": [{"action": "goto", "url": url}]},
    )
    run_worker()
    done = wait_for_job(services, job.job_id, timeout=90)

    assert done.status is JobStatus.FAILED
    assert done.attempt == 2
    assert [a.status for a in done.attempts] == [JobStatus.RETRY_SCHEDULED, JobStatus.FAILED]
    assert done.error is not None
    assert done.error.retryable is True
    assert "503" in done.error.message
    assert site.hits["/down"] == 2
    # The default trace mode is Playwright Test's on-first-retry: the failed first attempt
    # keeps its error and the page as it failed, no trace; its retry recorded one.
    kept = {(a.attempt, a.name) for a in done.artifacts}
    assert {(1, "failure.png"), (1, "failure.html")} <= kept, kept
    assert (1, "trace.zip") not in kept, kept
    assert (2, "trace.zip") in kept, kept
    assert done.attempts[0].error is not None and "503" in done.attempts[0].error.message


def test_missing_secret_fails_with_a_clear_reason_and_no_value_echoed(site, services, run_worker):
    url = site.add("/login", "<input id='pw'>")
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": url},
                {"action": "fill", "selector": "#pw", "value": "{{secrets.SITE_PASSWORD}}"},
            ]
        },
    )
    run_worker()
    done = wait_for_job(services, job.job_id)

    assert done.status is JobStatus.FAILED
    assert done.error is not None
    assert done.error.message == "secret SITE_PASSWORD not found"
    assert done.error.step_index == 1


def test_non_http_goto_and_loopback_without_permission_are_refused(
    site, services, make_settings, run_worker
):
    url = site.add("/private", "<h1>internal</h1>")
    # A file URL is refused when the job is made; one that comes from a secret is the
    # worker's to refuse.
    file_job = submit(services, {"steps": [{"action": "goto", "url": "{{secrets.TARGET}}"}]})
    loopback_job = submit(services, {"steps": [{"action": "goto", "url": url}]})
    secrets = FakeSecrets({(TENANT, "TARGET"): "file:///etc/passwd"})
    run_worker(make_settings(allow_loopback=False), secrets_resolver=secrets)

    file_done = wait_for_job(services, file_job.job_id)
    loop_done = wait_for_job(services, loopback_job.job_id)
    assert file_done.status is JobStatus.FAILED
    assert file_done.error is not None and "http and https" in file_done.error.message
    assert loop_done.status is JobStatus.FAILED
    assert loop_done.error is not None
    assert loop_done.error.kind == "egress_refused"
    assert "loopback" in loop_done.error.message
    assert site.hits.get("/private", 0) == 0


def test_stop_hands_unstarted_messages_back(site, services, settings, run_worker):
    running = run_worker()
    running.stop()
    url = site.add("/later", "<h1>later</h1>")
    job = submit(services, {"steps": [{"action": "goto", "url": url}]})
    # Nobody is polling: the message waits, visible, for the next worker.
    assert queue_counts(settings.queue_url("standard"))[0] == 1
    run_worker()
    assert wait_for_job(services, job.job_id).status is JobStatus.SUCCEEDED


LATE_PAGE = """<!doctype html><h1>loading</h1>
<script>setTimeout(() => {
  const p = document.createElement('p'); p.id = 'later'; p.textContent = 'ready';
  document.body.appendChild(p);
}, 1500);</script>"""


def _browser_processes():
    import os

    import psutil

    me = psutil.Process(os.getpid())
    return [
        p
        for p in me.children(recursive=True)
        if "chrom" in p.name().lower() and not any(a.startswith("--type=") for a in p.cmdline())
    ]


def test_a_browser_crash_is_retried_on_a_fresh_browser(site, services, run_worker):
    url = site.add("/crash", LATE_PAGE)
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": url},
                {"action": "wait_for", "selector": "#later", "timeout_ms": 20_000},
                {"action": "extract", "name": "state", "selector": "#later"},
            ]
        },
    )
    running = run_worker()
    wait_for_job(services, job.job_id, {JobStatus.RUNNING})
    while site.hits.get("/crash", 0) < 1:
        time.sleep(0.02)
    (browser_process,) = _browser_processes()
    browser_process.kill()  # the browser this test's worker launched

    done = wait_for_job(services, job.job_id, timeout=90)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"state": "ready"}
    assert done.attempt == 2
    first = done.attempts[0]
    assert first.status is JobStatus.RETRY_SCHEDULED
    assert first.error is not None and first.error.kind == "browser_crashed"
    assert running.worker.browsers.launches == 2


def test_drain_hands_a_running_job_back_when_the_period_ends(
    site, services, settings, make_settings, run_worker
):
    url = site.add("/long", "<h1>long</h1>")
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": url},
                {"action": "wait_for", "selector": "#never", "timeout_ms": 60_000},
            ]
        },
    )
    running = run_worker(make_settings(drain_seconds=0))
    wait_for_job(services, job.job_id, {JobStatus.RUNNING})
    while site.hits.get("/long", 0) < 1:
        time.sleep(0.02)
    running.stop()

    handed_back = services.store.get(TENANT, job.job_id)
    assert handed_back.status is JobStatus.RETRY_SCHEDULED
    assert handed_back.error is not None and handed_back.error.kind == "interrupted"
    # Visible again at once for the next worker, ahead of the jobs still waiting.
    assert queue_counts(settings.queue_url("standard-high"))[0] == 1


def test_a_running_job_leaves_nothing_in_its_queues_and_its_lease_holds_it(
    site, services, make_settings, run_worker
):
    """What scaling and the oldest-age alarm read (SQS's counts and ages) sees no running
    job: its message is deleted once the claim is written, and its lease, kept by the
    heartbeats, holds it past the lease it was claimed with (issue 21 item 4)."""
    url = site.add("/long-run", "<h1>long</h1>")
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": url},
                {"action": "wait_for", "selector": "#never", "timeout_ms": 120_000},
            ],
            "options": {"job_timeout_s": 600},
        },
    )
    # No drain at the end: the job never ends, and a drain would wait out its period.
    settings = make_settings(lease_seconds=10, heartbeat_seconds=2, drain_seconds=0)
    run_worker(settings)
    claimed = wait_for_job(services, job.job_id, {JobStatus.RUNNING})
    assert claimed.lease_expires_at is not None
    queues = [settings.queue_url(key) for key in settings.queue_urls if key.startswith("standard")]
    wait_for_empty_queue(settings.queue_url("standard"))  # the claim's delete is done
    deadline = time.monotonic() + 120
    while True:
        now = services.store.get(TENANT, job.job_id)
        # Still the first attempt, running: no one took it back, no message came back.
        assert now.status is JobStatus.RUNNING and now.attempt == claimed.attempt
        assert [queue_counts(q) for q in queues] == [(0, 0, 0)] * len(queues)
        if (now.lease_expires_at or 0) >= claimed.lease_expires_at + settings.lease_seconds:
            break  # it has outlived the lease it was claimed with
        assert time.monotonic() < deadline, "the lease was not kept"
        time.sleep(0.2)


def test_a_job_is_stopped_when_its_max_cost_usd_is_spent_and_not_retried(
    site, services, settings, run_worker
):
    url = site.add("/slow-shop", "<h1>waiting forever</h1>")
    # What 1.5 s of browser costs one attempt on this stage's worker shape.
    cap = cost_usd(1.5, settings.pricing_worker)
    job = submit(
        services,
        {
            "max_cost_usd": cap,
            "max_attempts": 3,
            "options": {"job_timeout_s": 120},
            "steps": [
                {"action": "goto", "url": url},
                {"action": "wait_for", "selector": "#never", "timeout_ms": 120_000},
            ],
        },
    )
    assert job.request.cost_cap is not None and 1.4 < job.request.cost_cap.seconds < 1.6
    run_worker()
    done = wait_for_job(services, job.job_id)

    assert done.status is JobStatus.FAILED, done.error
    assert done.error is not None and done.error.kind == "cost_cap_reached"
    assert done.error.step_index == 1 and "max_cost_usd" in done.error.message
    assert [a.attempt for a in done.attempts] == [1]  # never retried


def test_a_stopping_worker_leaves_none_of_its_claimed_messages_behind(
    site, services, settings, run_worker, monkeypatch
):
    """Claimed messages are deleted in batches, each within a second (browser_task.slot.
    deletes); a worker that stops sends what still waits, so nothing comes back later."""
    import browser_task.slot.deletes as deletes

    monkeypatch.setattr(deletes, "DELETE_WITHIN_S", 600.0)  # only the stop sends them
    url = site.add("/gathered", "<h1>gathered</h1>")
    jobs = [submit(services, {"steps": [{"action": "goto", "url": url}]}) for _ in range(3)]
    running = run_worker()
    for job in jobs:
        assert wait_for_job(services, job.job_id).status is JobStatus.SUCCEEDED
    running.stop()
    queues = [settings.queue_url(key) for key in settings.queue_urls if key.startswith("standard")]
    assert [queue_counts(q) for q in queues] == [(0, 0, 0)] * len(queues)
