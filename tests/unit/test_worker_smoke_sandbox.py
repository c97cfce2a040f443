"""The worker smoke run's sandbox (scripts/worker_smoke.py) from a checkout under a task
volume: a clone in /tmp, hidden by the task definition's empty /tmp unless shown again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "scripts"))

import worker_smoke  # noqa: E402
from smoke_specs import TaskSpec  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None,
    reason="needs root and bubblewrap (make bwrap installs it)",
)


@pytest.fixture
def clone_in_tmp() -> Iterator[Path]:
    # Under /tmp itself, readable by the worker's user, as `git clone ... /tmp/x` leaves it.
    clone = Path(tempfile.mkdtemp(prefix="pagefleet-clone-", dir="/tmp"))
    clone.chmod(0o755)
    (clone / "browser_task").mkdir(mode=0o755)
    (clone / "browser_task" / "__init__.py").write_text("CHECKOUT = 'here'\n")
    (clone / "browser_task" / "__init__.py").chmod(0o644)
    yield clone
    shutil.rmtree(clone)


def test_a_clone_under_tmp_is_seen_read_only_through_the_tasks_empty_tmp(
    clone_in_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_smoke, "REPO_ROOT", clone_in_tmp)
    image = worker_smoke.image_spec(worker_smoke.DOCKERFILE.read_text())
    task = TaskSpec(
        env={},
        writable=["/tmp"],
        read_only_root=True,
        dropped=["ALL"],
        init=True,
        health_check=[],
    )
    volume = tmp_path / "tmp-volume"
    volume.mkdir()
    os.chown(volume, worker_smoke.WORKER_UID, worker_smoke.WORKER_UID)
    (Path("/tmp") / f"host-only-{os.getpid()}").touch()
    argv = worker_smoke.bwrap_argv(
        task, image, {"/tmp": volume}, {"PATH": "/usr/bin:/bin"}, worker_smoke._seccomp_fd()
    )
    script = (
        f"cat {clone_in_tmp}/browser_task/__init__.py; "
        f"touch {clone_in_tmp}/written 2>/dev/null && echo checkout-writable; "
        "touch /tmp/scratch && echo tmp-writable; "
        f"test -e /tmp/host-only-{os.getpid()} && echo host-tmp-visible; "
        "touch /etc/pagefleet-smoke 2>/dev/null && echo root-writable; true"
    )
    try:
        result = subprocess.run(
            [*argv, "/bin/sh", "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            pass_fds=[int(argv[argv.index("--seccomp") + 1])],
        )
    finally:
        (Path("/tmp") / f"host-only-{os.getpid()}").unlink()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "CHECKOUT = 'here'" in lines  # the worker finds its code: no "No module named"
    assert "tmp-writable" in lines  # /tmp is still the task's writable volume
    assert "checkout-writable" not in lines
    assert "host-tmp-visible" not in lines  # and still empty of the host's /tmp
    assert "root-writable" not in lines
    assert (volume / "scratch").exists()
