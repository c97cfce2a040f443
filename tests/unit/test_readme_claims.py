"""The README's claims point at their proof and its facts are the repository's: each claim of
"What a job survives" links to a test that exists, the layout and the suite lists name every
folder and suite, and every `make` target the README names is there.

The README's CLI and curl examples, and its scripts (`--help`), run as printed in
tests/e2e/test_readme.py."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
TEST_LINK = re.compile(r"\[`(test_\w+)`\]\((tests/[\w/]+\.py)\)")
LINK = re.compile(r"\]\([^)\s]+\)")


def _section(heading: str) -> str:
    return README.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_every_claim_of_what_a_job_survives_links_to_its_proof() -> None:
    claims = _section("What a job survives").split("\n- ")[1:]
    assert len(claims) >= 10
    unproven = [c.split("\n")[0] for c in claims if not LINK.search(c)]
    assert unproven == []


def test_every_test_the_readme_names_is_in_the_file_it_links() -> None:
    named = TEST_LINK.findall(README)
    assert len(named) >= 20
    missing = [(test, path) for test, path in named if test not in _defined(ROOT / path)]
    assert missing == []


def _suites() -> set[str]:
    return {
        p.name
        for p in (ROOT / "tests").iterdir()
        if p.is_dir() and any(p.rglob("test_*.py")) and p.name != "support"
    }


def test_the_layout_names_every_folder_and_suite() -> None:
    layout = README.split("\nLayout: ", 1)[1].split("\n\n", 1)[0]
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    folders = {p.split("/", 1)[0] for p in tracked if "/" in p and not p.startswith(".")}
    assert {f for f in folders if f"`{f}/`" not in layout} == set()
    suites = layout.split("`tests/` (", 1)[1].split(")", 1)[0]
    assert {s.strip() for s in suites.split(",")} == _suites()
    assert "local stack" not in layout.split("`devstack/`")[0]  # the core holds no stack
    make_test = next(line for line in README.splitlines() if line.startswith("make test "))
    listed = make_test.split("(", 1)[1].rstrip(")").split(", ")
    assert set(listed) == _suites()


def _targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):", makefile, flags=re.M))


def test_every_make_target_the_readme_names_exists() -> None:
    named = set(re.findall(r"`make ([a-z][\w-]*)", README))
    named |= set(re.findall(r"^make ([a-z][\w-]*)", README, flags=re.M))
    assert {"run", "test", "demo", "docs"} <= named
    assert named - _targets() == set()
