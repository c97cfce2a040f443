"""Run pytest in a child process on a test layout written under ``tmp_path`` (tests of
tests/support/suites.py: what a suite's tests may do, how they are grouped)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_child_pytest(
    tmp_path: Path, *options: str, xdist: bool = False
) -> subprocess.CompletedProcess[str]:
    """pytest on ``tmp_path/tests`` (without xdist unless ``xdist``, ``-rA``: every outcome
    is printed), importing ``tests.support`` from this checkout."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *([] if xdist else ["-p", "no:xdist"]),
            *options,
            "--rootdir",
            str(tmp_path),
            "-rA",
            str(tmp_path / "tests"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
        check=False,
    )
