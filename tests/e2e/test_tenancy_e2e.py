"""Tenant limits, usage, deletion, retention and isolation on the whole local stack: two
workers with two slots each, real Chromium, the CLI as an operator runs it."""

from __future__ import annotations

import http.server
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from devstack.chaos import kill_worker, wait_until, worker_by_id
from devstack.loopback import serve_on_loopback
from devstack.stack import LocalStack
from pagefleet.adapters.dynamodb.codec import deserialize
from pagefleet.client import ApiError, Job, PagefleetClient
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import ApiSettings
from pagefleet.targets.breakers import BreakerState, origin_of
from tests.e2e.conftest import running

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BREAKER = '{"window_s":60,"min_requests":3,"failure_rate":0.5,"cooldown_s":60}'
# Limits an admin changes hold at once (no cache), leases short enough to see a dead worker.
FAST = {"PAGEFLEET_LIMITS_CACHE_SECONDS": "0", "PAGEFLEET_BREAKER": BREAKER}


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    local = LocalStack(
        api_port=0,
        workers=2,
        concurrency=2,
        sweeper_interval_s=5,
        worker_env={
            **FAST,
            "PAGEFLEET_LEASE_SECONDS": "12",
            "PAGEFLEET_HEARTBEAT_SECONDS": "3",
        },
        lambda_env=FAST,
    )
    yield from running(local)


@pytest.fixture(scope="module")
def admin_key(stack: LocalStack) -> str:
    return stack.create_tenant_key("ops", admin=True)


def tenant(stack: LocalStack, name: str) -> PagefleetClient:
    return stack.client(stack.create_tenant_key(name))


def cli(stack: LocalStack, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pagefleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, **stack.cli_env(), "PAGEFLEET_API_KEY": key},
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return done


def item(table: str, pk: str, sk: str) -> dict[str, Any]:
    got = RUNTIME.client("dynamodb").get_item(
        TableName=table, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
    )
    return deserialize(got.get("Item", {}))


def page(stack: LocalStack, sleep_ms: int = 0, **extra: Any) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"action": "goto", "url": f"{stack.site_url}/"}]
    if sleep_ms:
        steps.append({"action": "sleep", "ms": sleep_ms})
    steps.append({"action": "extract", "name": "title", "selector": "h1"})
    return {"steps": steps, **extra}


def epoch(at: str) -> float:
    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


# --- rate -----------------------------------------------------------------------------------------
def test_a_burst_over_the_rate_gets_429_with_retry_after(stack: LocalStack, admin_key: str) -> None:
    cli(stack, admin_key, "admin", "set-limits", "--tenant", "bursty", "--submits-per-minute", "3")
    client = tenant(stack, "bursty")
    minute = int(time.time() // 60)
    for _ in range(3):  # the burst defaults to the rate
        client.submit(page(stack))
    with pytest.raises(ApiError) as refused:
        client.submit(page(stack))
    assert refused.value.status == 429 and refused.value.code == "rate_limited"
    assert refused.value.retry_after is not None and 1 <= refused.value.retry_after <= 20
    view = client.tenant()
    if int(time.time() // 60) == minute:  # counted per clock minute: only when none began
        assert view.usage.submissions_this_minute == 3


# --- running cap ----------------------------------------------------------------------------------
def test_a_tenant_capped_at_one_never_runs_two_and_all_succeed(
    stack: LocalStack, admin_key: str
) -> None:
    cli(stack, admin_key, "admin", "set-limits", "--tenant", "capped", "--max-running", "1")
    client = tenant(stack, "capped")
    assert stack.provisioned is not None
    tenants_table = stack.provisioned.tenants_table
    ids = [client.submit(page(stack, sleep_ms=600, name=f"c{n}")).job_id for n in range(6)]
    # Sample the tenant's running slots (one item: an atomic read) until every job is done.
    most = 0
    deadline = time.monotonic() + 240
    while True:
        slots = item(tenants_table, "TENANT#capped", "LIMIT#RUNNING").get("running", set())
        most = max(most, len(slots))
        jobs = [client.get(job_id) for job_id in ids]
        if all(j.is_final for j in jobs) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 6, [j.error for j in jobs]
    assert most == 1
    # And by the records: no two attempts' claim-to-outcome spans overlap.
    spans = sorted(
        (epoch(a.started_at), epoch(a.finished_at or a.started_at))
        for j in jobs
        for a in j.attempts
    )
    for (_, first_end), (second_start, _) in itertools.pairwise(spans):
        assert second_start >= first_end
    assert any(j.attempt == 1 for j in jobs)  # deferred, never failed or retried for the cap
    # The worker tells its claims' starts to the queued count within a second of them
    # (browser_task.slot.ahead): the last may land after its job ended.
    deadline = time.monotonic() + 10
    view = client.tenant()
    while view.usage.queued and time.monotonic() < deadline:
        time.sleep(0.1)
        view = client.tenant()
    assert (view.usage.running, view.usage.queued) == (0, 0)


def test_a_killed_worker_does_not_leak_its_tenants_slot(stack: LocalStack, admin_key: str) -> None:
    cli(stack, admin_key, "admin", "set-limits", "--tenant", "killed", "--max-running", "1")
    client = tenant(stack, "killed")
    # Running long enough to be killed mid-job once seen running (its retry runs it again).
    first = client.submit(page(stack, sleep_ms=4000, name="victim")).job_id

    def running() -> Any:
        job = client.get(first)
        return job if job.status is JobStatus.RUNNING and job.attempts == [] else None

    wait_until(running, 60, what="the first job running")
    assert stack.provisioned is not None
    owner = item(stack.provisioned.jobs_table, "TENANT#killed", f"JOB#{first}")["lease_owner"]
    kill_worker(worker_by_id(stack, owner))
    stack.start_worker()
    second = client.submit(page(stack, name="after")).job_id
    for job_id in (first, second):
        done = wait_until(lambda j=job_id: (g := client.get(j)).is_final and g, 180)
        assert done.status is JobStatus.SUCCEEDED, done.error
    assert client.get(first).attempt == 2  # reclaimed after its worker died
    assert client.tenant().usage.running == 0


# --- usage ----------------------------------------------------------------------------------------
def test_usage_reports_browser_seconds_matching_the_jobs_durations(stack: LocalStack) -> None:
    client = tenant(stack, "metered")
    shot = {"action": "screenshot", "name": "page.png"}
    ids = []
    for _ in range(3):
        job = page(stack, sleep_ms=800, name="metered-flow")
        job["steps"].append(shot)
        ids.append(client.submit(job).job_id)
    jobs = [client.wait(job_id, timeout=180) for job_id in ids]
    assert all(j.status is JobStatus.SUCCEEDED for j in jobs)
    recorded = sum(
        epoch(a.finished_at or a.started_at) - epoch(a.started_at) for j in jobs for a in j.attempts
    )
    first_day = min(a.started_at for j in jobs for a in j.attempts)[:10]

    def counted() -> Any:  # from the first attempt's day to now (a day may end meanwhile)
        report = client.usage(first_day, datetime.now(UTC).date().isoformat())
        return report if report.total.jobs == 3 else None

    report = wait_until(counted, 30, what="usage of the three jobs")
    total = report.total
    assert total.attempts == 3 and total.page_requests >= 3
    assert total.artifact_puts == sum(len(j.artifacts) for j in jobs)
    assert total.artifact_bytes == sum(a.size for j in jobs for a in j.artifacts)
    # Slot time runs from the claim to the outcome, which comes just before the finish write
    # the job's record shows: within the recorded spans, and at least the pages' own 0.8 s
    # waits (how much of the rest is the write depends on the machine's load, not on us).
    assert 3 * 0.8 <= total.browser_seconds <= recorded + 0.05, (total, recorded)
    assert set(total.cost) == {"us-east-1", "ap-south-1"}
    assert all(c.total_usd > 0 for c in total.cost.values())
    assert [w.workflow for w in report.workflows] == ["metered-flow"]
    one = client.job_usage(ids[0])
    assert [a.attempt for a in one.attempts] == [1]


# --- deletion and retention -----------------------------------------------------------------------
def s3_keys(stack: LocalStack, prefix: str) -> list[str]:
    assert stack.provisioned is not None
    listed = RUNTIME.client("s3").list_objects_v2(
        Bucket=stack.provisioned.artifacts_bucket, Prefix=prefix
    )
    return [o["Key"] for o in listed.get("Contents", [])]


def test_a_deleted_job_is_404_and_its_artifacts_are_gone(stack: LocalStack) -> None:
    client = tenant(stack, "forgetful")
    job = page(stack)
    job["steps"].append({"action": "screenshot", "name": "page.png"})
    done = client.wait(client.submit(job).job_id, timeout=180)
    assert s3_keys(stack, f"forgetful/{done.job_id}/")
    deleted = client.delete(done.job_id)
    assert deleted.status == "deleted" and deleted.artifacts_deleted >= 1
    with pytest.raises(ApiError) as gone:
        client.get(done.job_id)
    assert gone.value.status == 404
    assert s3_keys(stack, f"forgetful/{done.job_id}/") == []
    # A running job is cancelled first, then deleted.
    running = client.submit(page(stack, sleep_ms=20_000)).job_id
    wait_until(lambda: client.get(running).status is JobStatus.RUNNING, 60)
    answer = client.delete(running)
    assert answer.status in ("deleted", "deleting")
    wait_until(lambda: not _exists(client, running), 60, what="the running job deleted")
    assert s3_keys(stack, f"forgetful/{running}/") == []


def _exists(client: PagefleetClient, job_id: str) -> bool:
    try:
        client.get(job_id)
    except ApiError as exc:
        return exc.status != 404
    return True


def test_every_record_kind_carries_its_expiry(stack: LocalStack, admin_key: str) -> None:
    from pagefleet.adapters.dynamodb.codec import idempotency_sk

    assert stack.provisioned is not None
    res = stack.provisioned
    cli(stack, admin_key, "admin", "set-limits", "--tenant", "keeper", "--retention-days", "7")
    client = tenant(stack, "keeper")
    job = page(stack)
    job["steps"].append({"action": "save_session", "name": "site"})
    done = client.wait(client.submit(job, idempotency_key="once").job_id, timeout=180)
    assert done.status is JobStatus.SUCCEEDED, done.error
    finished = int(epoch(done.finished_at or ""))

    def expiry() -> Any:
        return item(res.jobs_table, "TENANT#keeper", f"JOB#{done.job_id}").get("expires_at")

    assert int(wait_until(expiry, 30, what="the job's expiry")) == finished + 7 * 86_400
    idem = item(res.jobs_table, "TENANT#keeper", idempotency_sk("once"))
    assert int(idem["expires_at"]) == int(epoch(done.created_at or "")) + 86_400
    marker = wait_until(
        lambda: item(res.usage_table, "TENANT#keeper", f"ATTEMPT#{done.job_id}#0001"), 30
    )
    assert int(marker["expires_at"]) > finished + 365 * 86_400
    audit = RUNTIME.client("dynamodb").query(
        TableName=res.tenants_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"AUDIT#{datetime.now(UTC):%Y-%m}"}},
    )["Items"]
    assert audit and all("expires_at" in a for a in audit)
    head = RUNTIME.client("s3").head_object(
        Bucket=res.artifacts_bucket, Key="keeper/sessions/site.json"
    )
    metadata = {k.lower(): v for k, v in head["Metadata"].items()}  # names are headers
    assert int(metadata["expires-at"]) >= finished + 30 * 86_400 - 60, head


def test_an_expired_session_cannot_be_used(stack: LocalStack) -> None:
    assert stack.provisioned is not None
    bucket = stack.provisioned.artifacts_bucket
    client = tenant(stack, "sessions")
    save = page(stack)
    save["steps"].append({"action": "save_session", "name": "login"})
    assert client.wait(client.submit(save).job_id, timeout=180).status is JobStatus.SUCCEEDED
    use = {"steps": [{"action": "use_session", "name": "login"}, *page(stack)["steps"]]}
    assert client.wait(client.submit(use).job_id, timeout=180).status is JobStatus.SUCCEEDED
    # Thirty days later (its expiry moved into the past): the session is not used.
    s3 = RUNTIME.client("s3")
    key = "sessions/sessions/login.json"
    meta = {k.lower(): v for k, v in s3.head_object(Bucket=bucket, Key=key)["Metadata"].items()}
    s3.copy_object(
        Bucket=bucket,
        Key=key,
        CopySource={"Bucket": bucket, "Key": key},
        Metadata={**meta, "expires-at": str(int(time.time()) - 1)},
        MetadataDirective="REPLACE",
    )
    [listed] = client.saved_logins()
    assert listed.name == "login" and listed.expired
    refused = client.wait(client.submit(use).job_id, timeout=180)
    assert refused.status is JobStatus.FAILED
    assert refused.error is not None and refused.error.kind == "session_not_found"
    assert "expired" in refused.error.message
    client.delete_saved_login("login")
    assert client.saved_logins() == []


# --- rights ---------------------------------------------------------------------------------------
def test_set_limits_allow_evaluate_lets_the_tenants_evaluate_steps_run(
    stack: LocalStack, admin_key: str
) -> None:
    client = tenant(stack, "scripter")
    job = page(stack)
    job["steps"].append({"action": "evaluate", "expression": "6 * 7", "name": "answer"})
    with pytest.raises(ApiError) as refused:  # at submit: the submission policy
        client.submit(job)
    assert refused.value.status == 422 and refused.value.field == f"steps[{len(job['steps']) - 1}]"
    assert "allow_evaluate" in refused.value.message
    out = cli(stack, admin_key, "admin", "set-limits", "--tenant", "scripter", "--allow-evaluate")
    assert "allow_evaluate" in out.stdout
    allowed = client.wait(client.submit(job).job_id, timeout=180)
    assert allowed.status is JobStatus.SUCCEEDED, allowed.error
    assert allowed.result is not None and allowed.result["answer"] == 42
    audit = cli(stack, admin_key, "admin", "audit", "--json")
    actions = [(r["action"], r["tenant_id"]) for r in json.loads(audit.stdout)["records"]]
    assert ("limits.changed", "scripter") in actions


# --- shared parts ---------------------------------------------------------------------------------
class _Split(http.server.BaseHTTPRequestHandler):
    """/down/... answers 503 (the site failing for whoever asks there), the rest 200."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        status = 503 if self.path.startswith("/down") else 200
        body = b"<!doctype html><title>t</title><h1>split</h1>"
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_one_tenants_failures_do_not_delay_another_tenants_jobs(stack: LocalStack) -> None:
    server = serve_on_loopback(_Split, "split-site")
    try:
        origin = origin_of(server.url)
        assert origin is not None
        noisy, quiet = tenant(stack, "noisy"), tenant(stack, "quiet")
        # A closed port on the same host, and failing pages on the healthy origin.
        closed = f"http://127.0.0.1:{_closed_port()}/"
        failing = [
            noisy.submit({"steps": [{"action": "goto", "url": url}], "max_attempts": 1})
            for url in [closed] * 3 + [f"{server.url}/down/{n}" for n in range(3)]
        ]
        for job in failing:
            assert noisy.wait(job.job_id, timeout=180).status is JobStatus.FAILED
        breakers = RUNTIME.breakers(RUNTIME.settings(ApiSettings))
        wait_until(
            lambda: breakers.get(origin, "noisy").state is BreakerState.OPEN,
            30,
            what="the noisy tenant's own breaker open",
        )
        assert breakers.get(origin).state is BreakerState.CLOSED  # not for everyone
        # The noisy tenant's next job there waits; the quiet tenant's runs at once.
        held = noisy.submit({"steps": [{"action": "goto", "url": f"{server.url}/ok"}]})
        submitted = quiet.submit({"steps": [{"action": "goto", "url": f"{server.url}/ok"}]})
        # Read while it waits: once the breaker's cooldown is over it runs as the probe, and
        # its claim clears the reason (a loaded machine can take that long over the rest).
        waiting = wait_until(lambda: noisy.get(held.job_id).deferred_reason, 30)
        assert "this tenant's jobs" in waiting
        fine = quiet.wait(submitted.job_id, timeout=180)
        assert fine.status is JobStatus.SUCCEEDED and fine.attempt == 1
        assert fine.deferred_reason is None
        # The quiet tenant's own job used the origin (its outcome is written within seconds).
        view = wait_until(
            lambda: _seen(quiet, origin),
            30,
            what="the quiet tenant's view of the origin",
        )
        assert view == {"origin": origin, "state": "closed", "tenant_state": "closed"}
    finally:
        server.stop()


def test_colluding_tenants_cannot_stall_another_tenants_site(stack: LocalStack) -> None:
    """Issue 23: tenants C and D each ran five jobs [goto B's site, goto a closed port];
    the failures were charged to B's site, whose shared breaker then held B back."""
    server = serve_on_loopback(_Split, "b-site")
    breakers = RUNTIME.breakers(RUNTIME.settings(ApiSettings))
    try:
        site = origin_of(server.url)
        closed = f"http://127.0.0.1:{_closed_port()}/x"
        owner = tenant(stack, "site-owner")
        ok = {"steps": [{"action": "goto", "url": f"{server.url}/ok"}]}
        first = owner.wait(owner.submit(ok).job_id, timeout=180)
        assert first.status is JobStatus.SUCCEEDED, first.error
        colluders = [tenant(stack, "colluder-c"), tenant(stack, "colluder-d")]
        both = {
            "steps": [
                {"action": "goto", "url": f"{server.url}/"},
                {"action": "goto", "url": closed},
            ],
            "max_attempts": 1,
        }
        jobs = [(c, c.submit(both).job_id) for c in colluders for _ in range(5)]
        for c, job_id in jobs:
            failed = c.wait(job_id, timeout=180)
            assert failed.error is not None and failed.error.kind == "navigation_failed"
        after = _never_deferred(owner, ok)
        assert after.status is JobStatus.SUCCEEDED and after.attempt == 1
        # The failures are the closed port's, which is down for everyone.
        wait_until(
            lambda: breakers.get(origin_of(closed) or "").state is BreakerState.OPEN,
            30,
            what="the closed port's shared breaker open",
        )
        assert breakers.get(site or "").state is BreakerState.CLOSED

    finally:
        server.stop()


def test_tenants_failing_at_a_site_do_not_hold_back_its_regular_tenant(
    stack: LocalStack,
) -> None:
    """The shared breaker still opens when two tenants fail at a site, but it holds back
    only tenants with no recent success of their own there: a newcomer, never B."""
    server = serve_on_loopback(_Split, "b-site-2")
    breakers = RUNTIME.breakers(RUNTIME.settings(ApiSettings))
    try:
        site = origin_of(server.url) or ""
        owner = tenant(stack, "site-owner-2")
        ok = {"steps": [{"action": "goto", "url": f"{server.url}/ok"}]}
        assert owner.wait(owner.submit(ok).job_id, timeout=180).status is JobStatus.SUCCEEDED
        down = {"steps": [{"action": "goto", "url": f"{server.url}/down"}], "max_attempts": 1}
        failing = [tenant(stack, "failing-e"), tenant(stack, "failing-f")]
        for c, job_id in [(c, c.submit(down).job_id) for c in failing for _ in range(3)]:
            assert c.wait(job_id, timeout=180).status is JobStatus.FAILED
        wait_until(
            lambda: breakers.get(site).state is BreakerState.OPEN,
            30,
            what="the site's shared breaker open",
        )
        assert _never_deferred(owner, ok).status is JobStatus.SUCCEEDED
        newcomer = tenant(stack, "newcomer")
        held = newcomer.submit(ok)
        reason = wait_until(lambda: newcomer.get(held.job_id).deferred_reason, 30)
        assert "circuit open" in reason
        newcomer.cancel(held.job_id)
    finally:
        server.stop()


def _never_deferred(client: PagefleetClient, body: dict[str, Any]) -> Job:
    """Run a job to its end, checking it is never held back by a breaker on the way."""
    job_id = client.submit(body).job_id

    def final() -> Job | None:
        job = client.get(job_id)
        assert job.deferred_reason is None, job.deferred_reason
        return job if job.status.is_final else None

    done: Job = wait_until(final, 180, what=f"job {job_id} final")
    return done


def _seen(client: PagefleetClient, origin: str) -> dict[str, Any] | None:
    """The tenant's view of ``origin``'s breakers once its own job there is counted."""
    scheme_host, _, port = origin.rpartition(":")
    try:
        view = client._request("GET", f"/v1/domains/{scheme_host.split('//')[1]}:{port}").json()
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    mine: dict[str, Any] | None = {o["origin"]: o for o in view["origins"]}.get(origin)
    return mine


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
