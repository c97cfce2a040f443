"""The repository's documents stand alone: every file they link to is in the repository,
and none sends the reader to a path outside it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"`(\.\./[^`\s]*)`|(?<![\w./])(\.\./[\w./-]+)")


def test_every_linked_file_is_in_the_repository() -> None:
    for document in DOCUMENTS:
        for target in LINK.findall(document.read_text()):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            path = (document.parent / target.split("#", 1)[0]).resolve()
            assert path.is_relative_to(ROOT), f"{document.name} links outside: {target}"
            assert path.exists(), f"{document.name} links to a missing file: {target}"


def test_no_document_points_outside_the_repository() -> None:
    for document in DOCUMENTS:
        found = [a or b for a, b in OUTSIDE.findall(document.read_text())]
        assert not found, f"{document.name} points outside the repository: {found}"
