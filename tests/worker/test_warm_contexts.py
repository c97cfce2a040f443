"""Warm contexts (options.isolation = "tenant"): what a job leaves behind reaches the next
job of the same tenant and options, never another tenant's, and never after a failure."""

from __future__ import annotations

from typing import Any

from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import submit_job
from pagefleet.jobs.states import JobStatus
from tests.worker.conftest import TENANT, submit, wait_for_job

# The page shows the cookie it found, then sets one: a job that runs in a context another
# job used sees "seen=1".
COOKIE_PAGE = """<title>c</title><p id=c>?</p>
<script>
  document.getElementById("c").textContent = document.cookie || "none";
  document.cookie = "seen=1; path=/";
</script>"""


def _job(url: str, *, isolation: str = "tenant", fail: bool = False) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {"action": "goto", "url": url},
        {"action": "extract", "name": "cookie", "selector": "#c"},
    ]
    if fail:
        # Its own short timeout: the step would wait out the job's 10 s action timeout.
        steps.append({"action": "assert", "text_contains": "never on this page", "timeout_ms": 500})
    return {"steps": steps, "max_attempts": 1, "options": {"isolation": isolation}}


def _run(services: Any, body: dict[str, Any], tenant: str = TENANT) -> JobRecord:
    if tenant == TENANT:
        job = submit(services, body)
    else:
        job = submit_job(services, tenant, JobRequest.model_validate(body)).job
    return wait_for_job_of(services, tenant, job.job_id)


def wait_for_job_of(services: Any, tenant: str, job_id: str) -> JobRecord:
    if tenant == TENANT:
        return wait_for_job(services, job_id)
    import time

    deadline = time.monotonic() + 60
    while True:
        job = services.store.get(tenant, job_id)
        if job.status.is_final:
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job.status.value}"
        time.sleep(0.05)


def _cookie(job: JobRecord) -> str:
    assert job.status is JobStatus.SUCCEEDED, job.error
    assert job.result is not None
    return str(job.result["cookie"])


def test_same_tenant_reuses_a_warm_context_other_tenants_never_do(
    run_worker, services, make_settings, site
) -> None:
    url = site.add("/cookie", COOKIE_PAGE)
    running = run_worker(make_settings(concurrency=1))
    assert _cookie(_run(services, _job(url))) == "none"
    # Same tenant, same options: the context (and its cookie) carried over.
    assert _cookie(_run(services, _job(url))) == "seen=1"
    # Another tenant with the very same options: a fresh context.
    assert _cookie(_run(services, _job(url), tenant="tenant-b")) == "none"
    # A job that did not ask for it never gets a warm context.
    assert _cookie(_run(services, _job(url, isolation="job"))) == "none"
    assert running.worker.browsers.warm.reused == 1


def test_a_failed_job_drops_its_warm_context(run_worker, services, make_settings, site) -> None:
    url = site.add("/cookie", COOKIE_PAGE)
    run_worker(make_settings(concurrency=1))
    assert _cookie(_run(services, _job(url))) == "none"
    failed = _run(services, _job(url, fail=True))
    assert failed.status is JobStatus.FAILED
    assert failed.result is not None and failed.result["cookie"] == "seen=1"  # it was warm
    # The failure closed that context: the next job starts clean.
    assert _cookie(_run(services, _job(url))) == "none"
