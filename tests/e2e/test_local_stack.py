"""The whole local stack, driven over HTTP as a client would: API, worker, Chromium, S3."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from devstack.examples import EXAMPLES_DIR, load_example
from devstack.stack import LocalStack
from pagefleet.client import ApiError, PagefleetClient
from tests.support.suites import DEMO_COMMAND, STACK_STOP

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "pagefleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "POWERTOOLS_LOG_LEVEL": "WARNING", **(env or {})},
        check=False,
    )


def test_extract_job_succeeds_and_its_screenshot_downloads_intact(
    stack: LocalStack, client: PagefleetClient
) -> None:
    workflow = load_example(EXAMPLES_DIR / "extract-products.json", stack.site_url)
    job = client.wait(client.submit(workflow).job_id, timeout=180)

    assert job.status.value == "succeeded", job.error
    assert job.result is not None
    names = json.dumps(job.result)
    assert "Storm lantern" in names and "/products/kettle.html" in names
    links = {a.name: a for a in client.artifacts(job.job_id)}
    shot = links["products.png"]
    data = client.download(shot.url)  # the presigned URL, no API key
    assert data.startswith(PNG_MAGIC)
    assert hashlib.sha256(data).hexdigest() == shot.sha256
    recorded = {a.name: a.sha256 for a in job.artifacts}
    assert recorded["products.png"] == shot.sha256


def test_selector_that_never_appears_fails_with_a_readable_reason(
    stack: LocalStack, client: PagefleetClient
) -> None:
    workflow = {
        "name": "missing-selector",
        "inputs": {"site": stack.site_url},
        "max_attempts": 1,
        "steps": [
            {"action": "goto", "url": "{{inputs.site}}/"},
            {"action": "wait_for", "selector": "#does-not-exist", "timeout_ms": 1000},
            {"action": "screenshot", "name": "never.png"},
        ],
    }
    job = client.wait(client.submit(workflow).job_id, timeout=180)

    assert job.status.value == "failed"
    assert job.error is not None
    assert job.error.step_index == 1
    reason = f"{job.error.step} {job.error.message}"
    assert "#does-not-exist" in reason
    assert job.error.timeout == "action" or "timeout" in reason.lower()
    assert not job.error.retryable


def test_request_without_a_valid_key_is_401(stack: LocalStack) -> None:
    with httpx.Client(base_url=stack.api_url, trust_env=False) as http:
        missing = http.get("/v1/jobs")
        wrong = http.get("/v1/jobs", headers={"Authorization": "Bearer pf_not_a_key"})
    assert missing.status_code == 401
    assert missing.json() == {"error": {"code": "unauthorized", "message": "Unauthorized"}}
    assert wrong.status_code == 401


def test_another_tenants_job_is_404_on_every_route(
    stack: LocalStack, client: PagefleetClient
) -> None:
    workflow = load_example(EXAMPLES_DIR / "navigate-second-page.json", stack.site_url)
    job = client.submit(workflow)
    with stack.client(stack.create_tenant_key("tenant-b")) as other:
        with pytest.raises(ApiError) as got:
            other.get(job.job_id)
        assert got.value.status == 404
        with pytest.raises(ApiError) as listed:
            other.artifacts(job.job_id)
        assert listed.value.status == 404
        assert job.job_id not in {j.job_id for j in other.list(limit=100).jobs}
    assert client.get(job.job_id).job_id == job.job_id


def test_cli_prints_field_level_validation_errors(stack: LocalStack, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": [{"action": "goto"}, {"action": "click"}]}))
    env = {"PAGEFLEET_API_URL": stack.api_url, "PAGEFLEET_API_KEY": stack.dev_api_key or ""}

    local = _cli("submit", str(bad), env=env)
    remote = _cli("submit", str(bad), "--no-local-check", env=env)

    for run in (local, remote):
        assert run.returncode == 2, run.stderr
        assert "steps[0].goto.url" in run.stderr
        assert "steps[1].click.selector" in run.stderr
        assert "Traceback" not in run.stderr
    assert "422" in remote.stderr


def test_cli_submit_wait_status_and_jobs_talk_to_the_api(stack: LocalStack) -> None:
    env = {"PAGEFLEET_API_URL": stack.api_url, "PAGEFLEET_API_KEY": stack.dev_api_key or ""}
    workflow = EXAMPLES_DIR / "navigate-second-page.json"

    run = _cli(
        "submit",
        str(workflow),
        "--wait",
        "--json",
        "--input",
        f"site={stack.site_url}",
        env=env,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr
    job = json.loads(run.stdout)
    assert job["status"] == "succeeded"

    status = _cli("status", job["job_id"], env=env)
    assert status.returncode == 0 and "succeeded" in status.stdout
    listed = _cli("jobs", "--status", "succeeded", "--json", env=env)
    assert job["job_id"] in {j["job_id"] for j in json.loads(listed.stdout)["jobs"]}
    # A well-formed id nobody has: not found; a malformed one: refused naming the field.
    missing = _cli("status", "0" * 26, env=env)
    assert missing.returncode == 2 and "404" in missing.stderr
    malformed = _cli("status", "0000000000notajob", env=env)
    assert malformed.returncode == 2 and "422" in malformed.stderr and "job_id" in malformed.stderr


@pytest.mark.xdist_group(DEMO_COMMAND)  # its own stack: runs beside the module's
def test_demo_command_exits_zero_when_every_example_succeeds() -> None:
    run = _cli("demo", "--api-port", "0", timeout=480)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "all examples succeeded" in run.stdout


@pytest.mark.xdist_group(STACK_STOP)  # its own stack: runs beside the module's
def test_stopping_a_stack_leaves_no_process_behind() -> None:
    import psutil

    def family_of(local: LocalStack) -> list[psutil.Process]:
        environments = [p for f in local.functions.values() for p in f.processes()]
        children = (local.moto, *local.worker_processes, *environments)
        roots = [psutil.Process(p.pid) for p in children if p]
        return roots + [c for r in roots for c in r.children(recursive=True)]

    local = LocalStack(api_port=0, workers=1, concurrency=1)
    with local:
        # The worker launches its Chromium at start; wait until it is there to be reaped.
        for _ in range(600):
            family = family_of(local)
            if any("chrom" in p.name() for p in family):
                break
            time.sleep(0.05)
        assert any("chrom" in p.name() for p in family)
        # The API and the authorizer have a warm execution environment each.
        assert sum(len(f.processes()) for f in local.functions.values()) >= 2
    local.cleanup_logs()
    alive = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == []


def test_cli_cancels_a_running_job_mid_action(stack: LocalStack, tmp_path: Path) -> None:
    """A job stuck waiting is stopped within seconds; its earlier screenshot is kept."""
    workflow = {
        "steps": [
            {"action": "goto", "url": "{{inputs.site}}/"},
            {"action": "screenshot", "name": "before.png"},
            {"action": "wait_for", "selector": "#never-there", "timeout_ms": 120000},
        ],
        "options": {"job_timeout_s": 600},
    }
    path = tmp_path / "stuck.json"
    path.write_text(json.dumps(workflow))
    env = stack.cli_env()
    submitted = _cli("submit", str(path), "--input", f"site={stack.site_url}", "--json", env=env)
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["job_id"]
    with PagefleetClient(stack.api_url, stack.dev_api_key) as client:
        # A job's artifacts are recorded when it ends: its run events say it is waiting.
        deadline = time.monotonic() + 120
        while not any(
            e.type == "step_started" and e.index == 2 for e in client.events(job_id).events
        ):
            assert not client.get(job_id).is_final and time.monotonic() < deadline
            time.sleep(0.2)
        # Its worker told its task's ECS agent: no scale-in stops the task meanwhile.
        assert stack.protected_workers()
        cancelled = _cli("cancel", job_id, env=env)
        assert cancelled.returncode == 0, cancelled.stderr
        job = client.wait(job_id, timeout=20)  # far below the step's two minutes
    assert job.status.value == "cancelled"
    assert job.error is not None and job.error.kind == "cancelled"
    assert [a.name for a in job.artifacts] == ["before.png"]
