"""What a reader trusts without running anything is held by a test: every step action a
workflow may name has a handler in the worker (a missing one would show only when a job
runs it), and the state diagram in docs/architecture.md draws exactly the transition table."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel

from browser_task.run.steps import HANDLERS
from pagefleet.jobs.states import TRANSITIONS, JobStatus
from pagefleet.workflow import Step
from pagefleet.workflow.steps.control import Paginate
from pagefleet.workflow.steps.session import UseSession

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
# Dispatched by the executor itself: they need where they sit in the workflow.
DISPATCHED_BY_THE_EXECUTOR = {Paginate, UseSession}


def _step_models() -> list[type[BaseModel]]:
    union = typing.get_args(Step)[0]
    return list(typing.get_args(union))


def test_every_step_action_a_workflow_may_name_has_a_handler_in_the_worker() -> None:
    models = _step_models()
    assert len(models) >= 20  # the union was read, not an empty tuple
    missing = [
        m.model_fields["action"].default
        for m in models
        if m not in DISPATCHED_BY_THE_EXECUTOR and m.model_fields["action"].default not in HANDLERS
    ]
    assert missing == [], f"step actions without a handler in browser_task/run/steps: {missing}"
    actions = {m.model_fields["action"].default for m in models}
    assert set(HANDLERS) <= actions, set(HANDLERS) - actions  # no handler for a removed step


def _diagram_moves() -> set[tuple[str, str]]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = re.search(r"```mermaid\nstateDiagram-v2\n(.*?)```", text, re.S)
    assert block is not None, "docs/architecture.md has no lifecycle state diagram"
    moves = re.findall(r"^\s*(\S+)\s+-->\s+([a-z_]+)", block.group(1), re.M)
    return {(a, b) for a, b in moves if a != "[*]"}


def test_the_state_diagram_draws_every_move_of_the_transition_table_and_no_other() -> None:
    table = {(a.value, b.value) for a, targets in TRANSITIONS.items() for b in targets}
    drawn = _diagram_moves()
    assert table - drawn == set(), f"moves the diagram omits: {sorted(table - drawn)}"
    assert drawn - table == set(), f"moves drawn that the table refuses: {drawn - table}"
    states = {s for move in drawn for s in move}
    assert states == {s.value for s in JobStatus}  # needs_review too


def _layout_words() -> set[str]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", block))


def test_the_layout_in_architecture_md_names_every_module_of_the_core_and_the_worker() -> None:
    """The core, the worker, the Lambda functions and the local stack; infra's constructs
    are held by tests/unit/test_architecture_doc.py, and tests/ and bench/ are described by
    their folders (a module there is a test or a benchmark of what it names)."""
    root = ARCHITECTURE.parents[1]
    words = _layout_words()
    missing = []
    for package in ("pagefleet", "browser_task", "functions", "devstack"):
        for path in sorted((root / package).rglob("*.py")):
            name = path.parent.name if path.stem == "__init__" else path.stem
            if name not in words and name.strip("_") not in words:
                missing.append(str(path.relative_to(root)))
    assert missing == [], f"modules docs/architecture.md's layout does not name: {missing}"
