"""The CLI is the top of the core: only its local-stack commands may start ``devstack``."""

from __future__ import annotations

import ast
from pathlib import Path

PAGEFLEET = Path(__file__).resolve().parents[2] / "pagefleet"
ALLOWED = {PAGEFLEET / "cli" / "local.py"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_only_the_local_commands_import_devstack() -> None:
    importers = {
        path
        for path in PAGEFLEET.rglob("*.py")
        if any(name.split(".")[0] == "devstack" for name in _imports(path))
    }
    assert importers <= ALLOWED, sorted(str(p.relative_to(PAGEFLEET)) for p in importers)
    assert importers == ALLOWED  # the rule above still looks at the right file
