"""How tests/support/suites.py groups tests for ``--dist loadgroup``: a module's tests in the
module's group, a test that names a group of its own in that group alone.

pytest-xdist joins every ``xdist_group`` name a test carries into one group: a test given
a group of its own and its module's too would run in a third group, "a_b", with nothing
gained. The tests run in a child pytest on a copy of the layout (no socket is opened).
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from tests.support.child_pytest import REPO, run_child_pytest


def test_a_test_that_names_its_group_is_in_that_group_only(tmp_path: Path) -> None:
    (tmp_path / "tests" / "e2e").mkdir(parents=True)
    (tmp_path / "tests" / "e2e" / "test_grouped.py").write_text(
        textwrap.dedent(
            """
            import pytest

            def groups(request):
                return [m.args[0] for m in request.node.iter_markers("xdist_group")]

            def test_in_the_modules_group(request):
                assert groups(request) == ["e2e/test_grouped.py"]

            @pytest.mark.xdist_group("e2e/alone")
            def test_in_its_own_group(request):
                assert groups(request) == ["e2e/alone"]
            """
        )
    )
    _write_root_conftest(tmp_path)
    run = run_child_pytest(tmp_path)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "PASSED tests/e2e/test_grouped.py::test_in_the_modules_group" in out, out
    assert "PASSED tests/e2e/test_grouped.py::test_in_its_own_group" in out, out


def test_every_module_on_the_default_stack_is_in_a_shared_stacks_group(tmp_path: Path) -> None:
    """tests/e2e/conftest.py's ``stack`` comes from ``shared_stack``; a module that
    overrides ``stack`` keeps its module's group, and so its own stack."""
    (tmp_path / "tests" / "e2e").mkdir(parents=True)
    (tmp_path / "tests" / "e2e" / "conftest.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.fixture(scope="module")
            def shared_stack():
                return "shared"

            @pytest.fixture(scope="module")
            def stack(shared_stack):
                return shared_stack

            @pytest.fixture
            def groups(request):
                return [m.args[0] for m in request.node.iter_markers("xdist_group")]
            """
        )
    )
    # A module suites.ON_SECOND_STACK names shares the second stack; any other the first.
    for name, group in (("first", "shared-stack"), ("console", "shared-stack-2")):
        (tmp_path / "tests" / "e2e" / f"test_{name}.py").write_text(
            textwrap.dedent(
                """
                def test_on_the_shared_stack(stack, groups):
                    assert stack == "shared"
                    assert groups == ["e2e/GROUP"]

                def test_without_a_stack(groups):
                    assert groups == ["e2e/" + __file__.rsplit("/", 1)[1]]
                """
            ).replace("GROUP", group)
        )
    (tmp_path / "tests" / "e2e" / "test_own.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.fixture(scope="module")
            def stack():
                return "own"

            def test_on_its_own_stack(stack, groups):
                assert stack == "own"
                assert groups == ["e2e/test_own.py"]
            """
        )
    )
    _write_root_conftest(tmp_path)
    run = run_child_pytest(tmp_path)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert out.count("PASSED") == 5, out


def test_the_longest_group_starts_first_however_few_its_tests(tmp_path: Path) -> None:
    """pytest-xdist's loadgroup by default hands out the groups with the most tests first: a
    group of one test of minutes (the browser lifecycle) went last and made the run's tail.
    With the project's options (pyproject.toml) it follows suites.LONGEST_FIRST."""
    (tmp_path / "tests" / "worker").mkdir(parents=True)
    (tmp_path / "tests" / "unit").mkdir()
    (tmp_path / "tests" / "worker" / "test_browser_lifecycle.py").write_text(
        "def test_minutes():\n    pass\n"
    )
    (tmp_path / "tests" / "unit" / "test_many.py").write_text(
        "".join(f"def test_{n}():\n    pass\n\n" for n in range(6))
    )
    _write_root_conftest(tmp_path)
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    run = run_child_pytest(tmp_path, "-n", "1", "--dist", "loadgroup", "-v", xdist=True)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    ran = [line for line in out.splitlines() if line.startswith("[gw0]") and "PASSED" in line]
    assert len(ran) == 7, out
    assert "test_browser_lifecycle.py::test_minutes" in ran[0], ran


def _write_root_conftest(tmp_path: Path) -> None:
    """The layout's tests/conftest.py: groups and order as tests/conftest.py sets them."""
    (tmp_path / "tests" / "conftest.py").write_text(
        textwrap.dedent(
            """
            from pathlib import Path

            import pytest

            from tests.support.suites import mark_suites, order_for_workers

            @pytest.hookimpl(tryfirst=True)
            def pytest_collection_modifyitems(config, items):
                mark_suites(items, Path(__file__).parent)
                order_for_workers(items, Path(__file__).parent)
            """
        )
    )
