"""What the circuit breakers count, and against which origin (no browser, no AWS)."""

from __future__ import annotations

from browser_task.egress.breakers import counts_against_target
from browser_task.egress.http import UNREACHABLE, UNRESOLVED
from browser_task.errors import classify_navigation_error, egress_failure
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.preview import target_origin
from pagefleet.jobs.record import JobError, JobRecord
from pagefleet.jobs.states import JobStatus


def record(url: str) -> JobRecord:
    request = JobRequest.model_validate(
        {"steps": [{"action": "goto", "url": url}], "inputs": {"port": 8443}}
    )
    return JobRecord(
        tenant_id="t",
        job_id="j",
        status=JobStatus.QUEUED,
        request=request,
        created_at="2026-11-30T00:00:00.000Z",
        updated_at="2026-11-30T00:00:00.000Z",
        correlation_id="c",
        pool="standard",
    )


def test_a_job_is_counted_against_its_first_gotos_origin() -> None:
    assert target_origin(record("https://Shop.Test/a").request) == "https://shop.test:443"
    assert (
        target_origin(record("http://shop.test:{{inputs.port}}/").request)
        == "http://shop.test:8443"
    )


def test_an_unresolvable_host_is_the_jobs_mistake_not_the_sites() -> None:
    resolved = classify_navigation_error("net::ERR_NAME_NOT_RESOLVED at https://x.invalid/", "u")
    assert resolved.kind == "host_unresolved" and resolved.retryable
    via_proxy = egress_failure("http://x.invalid/", "", "could not resolve x.invalid", UNRESOLVED)
    assert via_proxy.kind == "host_unresolved"
    error = JobError(kind="host_unresolved", message="no such host", retryable=True)
    assert counts_against_target(error) is None  # neither failure nor success of the site


def test_a_failing_site_counts_and_a_workflow_mistake_does_not() -> None:
    refused = egress_failure("http://127.0.0.1:9/", "", "connection refused", UNREACHABLE)
    assert counts_against_target(refused.to_job_error()) is True
    down = JobError(kind="target_unavailable", message="HTTP 503", retryable=True)
    assert counts_against_target(down) is True
    mistake = JobError(kind="selector_not_found", message="no #x", retryable=False)
    assert counts_against_target(mistake) is None
    assert counts_against_target(None) is False


def test_a_navigation_failure_names_the_origin_that_failed() -> None:
    refused = classify_navigation_error("net::ERR_CONNECTION_REFUSED", "http://127.0.0.1:9/x")
    assert refused.origin == "http://127.0.0.1:9"
    redirected = egress_failure(
        "https://shop.test/a", "https://down.test:8443/b", "connection refused", UNREACHABLE
    )
    assert redirected.origin == "https://down.test:8443"
    tunnel = egress_failure("https://shop.test/a", "down.test:8443", "refused", UNREACHABLE)
    assert tunnel.origin == "https://down.test:8443"
    assert redirected.to_job_error().kind == "navigation_failed"
