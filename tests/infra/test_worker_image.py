"""The worker as its task definition runs it: writable volumes, health check, the smoke run."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from browser_task.observe.health import Liveness, check

from .helpers import logical_id

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "scripts"))

import worker_smoke  # noqa: E402
from sandbox_seccomp import no_user_namespaces  # noqa: E402

DOCKERFILE = (REPO_ROOT / "browser_task" / "Dockerfile").read_text()


def _worker(synth, pool):  # type: ignore[no-untyped-def]
    task = synth.raw["Resources"][logical_id(pool.task_definition)]["Properties"]
    return next(c for c in task["ContainerDefinitions"] if c["Name"] == "Worker")


@pytest.mark.infra
@pytest.mark.slow
def test_every_writable_path_is_an_image_volume_the_user_owns_or_may_write(synth) -> None:
    # Fargate mounts each as an empty root-owned 0755 directory unless the image declares it.
    image = worker_smoke.image_spec(DOCKERFILE)
    assert image.user == "pwuser"
    for pool in synth.stack.workers.pools.values():
        paths = [m["ContainerPath"] for m in _worker(synth, pool)["MountPoints"]]
        assert paths
        for path in paths:
            assert path in image.volumes, f"{path} is not a VOLUME in the Dockerfile"
            owner, mode = worker_smoke.fargate_volume(path, image)
            assert owner == image.user or mode & 0o002, (path, owner, oct(mode))


@pytest.mark.infra
@pytest.mark.slow
def test_worker_has_a_liveness_health_check_and_no_chromium_sandbox(stage_synth) -> None:
    for pool in stage_synth.stack.workers.pools.values():
        worker = _worker(stage_synth, pool)
        health = worker["HealthCheck"]
        assert health["Command"] == ["CMD", "python", "-m", "browser_task.observe.health"]
        assert health["StartPeriod"] >= 60 and health["Retries"] >= 2
        env = {e["Name"]: e["Value"] for e in worker["Environment"]}
        # Fargate's seccomp profile refuses the user namespaces Chromium's sandbox needs.
        assert env["PAGEFLEET_CHROMIUM_SANDBOX"] == "false"
    assert 'CMD ["python", "-m", "browser_task.observe.health"]' in DOCKERFILE


@pytest.mark.infra
@pytest.mark.slow
def test_the_worker_runs_with_two_malloc_arenas_in_the_image_and_the_task(synth) -> None:
    # glibc would give each of the worker's threads an arena, up to 8 x cores (decisions.md).
    assert worker_smoke.image_spec(DOCKERFILE).env["MALLOC_ARENA_MAX"] == "2"
    for pool in synth.stack.workers.pools.values():
        env = {e["Name"]: e["Value"] for e in _worker(synth, pool)["Environment"]}
        assert env["MALLOC_ARENA_MAX"] == "2"


def test_the_image_build_checks_that_videos_can_be_recorded() -> None:
    # Playwright's ffmpeg for options.video, at the path the locked driver looks for.
    assert "&& /app/.venv/bin/python -m browser_task.browser.video" in DOCKERFILE
    assert (
        "ENV PYTHONUNBUFFERED=1" in DOCKERFILE
        and "PLAYWRIGHT_BROWSERS_PATH=/ms-playwright" in DOCKERFILE
    )


def test_liveness_file_goes_stale_when_the_loop_stops(tmp_path) -> None:
    path = tmp_path / "alive"
    now = [100.0]
    liveness = Liveness(path, every_s=5, clock=lambda: now[0])
    assert "does not exist" in (check(path) or "")
    liveness.beat()
    mtime = path.stat().st_mtime
    assert check(path, 60, now=mtime + 59) is None
    assert "poll loop stopped" in (check(path, 60, now=mtime + 61) or "")
    os.utime(path, (1, 1))
    liveness.beat()  # within every_s of the last touch: not rewritten
    assert path.stat().st_mtime == 1
    now[0] += 5
    liveness.beat()
    assert path.stat().st_mtime > 1


def test_a_busy_slot_keeps_the_file_fresh(tmp_path) -> None:
    path = tmp_path / "alive"
    liveness = Liveness(path, every_s=0.01)

    async def long_job() -> None:
        async with liveness.busy():
            await asyncio.sleep(0.05)
            os.utime(path, (1, 1))
            await asyncio.sleep(0.05)

    asyncio.run(long_job())
    assert path.stat().st_mtime > 1


def test_seccomp_filter_is_a_whole_program() -> None:
    for machine in ("x86_64", "aarch64"):
        program = no_user_namespaces(machine)
        assert len(program) % 8 == 0 and len(program) // 8 == 12


@pytest.mark.infra
@pytest.mark.slow
@pytest.mark.e2e
def test_worker_runs_a_job_under_the_task_definitions_constraints(synths, tmp_path, capsys) -> None:
    """scripts/worker_smoke.py against prod's task definition and IAM policies (what make
    deploy-check runs)."""
    if os.geteuid() != 0 or shutil.which("bwrap") is None:
        pytest.skip("needs root and bubblewrap (make deploy-check installs it)")
    from devstack.iam.synth import record

    prod = synths.get("prod")
    principals = tmp_path / "iam-synth.json"
    principals.write_text(json.dumps(record(prod.stack, prod.raw)))
    argv = ["--template", str(prod.template_path), "--timeout", "120"]
    code = worker_smoke.main([*argv, "--iam-synth", str(principals)])
    # The smoke run's reason (and the worker's last log lines) in the failure itself.
    assert code == 0, capsys.readouterr().err[-6000:]
