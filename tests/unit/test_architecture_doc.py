"""docs/architecture.md names what the code has: every construct of the stack, every port
the services are typed on, the pool's priorities, and the lease as the record's alone."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = (REPO_ROOT / "docs" / "architecture.md").read_text()
# Ports that live beside their service rather than in a ports.py (AWS adapters implement them).
PORTS_ELSEWHERE = (
    "Breakers",
    "SessionInbox",
    "InboxRegistry",
    "ScheduleStore",
    "SchedulerMirror",
    "WorkflowStore",
)


def _named(name: str) -> bool:
    return f"`{name}`" in ARCHITECTURE


def test_every_construct_module_is_named() -> None:
    modules = sorted(
        p.stem for p in (REPO_ROOT / "infra" / "constructs").glob("*.py") if p.stem != "__init__"
    )
    assert [m for m in modules if not _named(m)] == []


def test_every_port_is_named() -> None:
    ports = list(PORTS_ELSEWHERE)
    for source in (REPO_ROOT / "pagefleet").rglob("ports.py"):
        for node in ast.parse(source.read_text()).body:
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            if any(getattr(b, "id", None) == "Protocol" for b in node.bases):
                ports.append(node.name)
    assert [p for p in ports if not _named(p)] == []


def test_priorities_and_the_lease_are_described_as_the_code_has_them() -> None:
    from pagefleet.specs.resources import PRIORITIES

    assert len(PRIORITIES) == 3
    assert "a high, a normal and a low queue per pool" in ARCHITECTURE
    assert "two priorities" not in ARCHITECTURE and "a high and a normal queue" not in ARCHITECTURE
    # The claim deletes the message: no visibility timeout is part of the lease.
    assert not re.search(r"visibility timeout is the queue's side of the lease", ARCHITECTURE)
    assert "functions/live" in ARCHITECTURE and "SessionInbox" in ARCHITECTURE
