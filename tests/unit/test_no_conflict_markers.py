"""No merge conflict is ever committed: no tracked text file holds a line that starts with
git's conflict markers (a merge once committed some into the docs)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Built here, so this file does not hold the markers it looks for.
MARKER = re.compile(r"^(" + "<" * 7 + "|" + ">" * 7 + ")( |$)", re.M)


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    files = []
    for name in filter(None, listed):
        path = ROOT / name.decode()
        if not path.is_file():
            continue
        head = path.read_bytes()[:8192]
        if b"\0" not in head:  # git's own test for a binary file
            files.append(path)
    return files


def test_no_tracked_file_holds_a_conflict_marker() -> None:
    files = _tracked_text_files()
    assert any(p.suffix == ".md" for p in files) and any(p.suffix == ".py" for p in files)
    marked = [
        f"{p.relative_to(ROOT)}:{p.read_text(errors='replace')[: m.start()].count(chr(10)) + 1}"
        for p in files
        for m in MARKER.finditer(p.read_text(errors="replace"))
    ]
    assert marked == []


def test_a_marker_is_found_where_a_merge_leaves_one() -> None:
    merged = "a\n" + "<" * 7 + " HEAD\nb\n=======\nc\n" + ">" * 7 + " main\n"
    assert [m.group(1)[0] for m in MARKER.finditer(merged)] == ["<", ">"]
    assert not MARKER.search("<" * 8 + " not one\nx " + ">" * 7 + "\n")
