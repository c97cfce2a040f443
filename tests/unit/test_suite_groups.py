"""How tests/support/suites.py groups tests for ``--dist loadgroup``: a module's tests in the
module's group, a test that names a group of its own in that group alone.

pytest-xdist joins every ``xdist_group`` name a test carries into one group: a test given
a group of its own and its module's too would run in a third group, "a_b", with nothing
gained. The tests run in a child pytest on a copy of the layout (no socket is opened).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.support.child_pytest import run_child_pytest


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
    run = run_child_pytest(tmp_path)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "PASSED tests/e2e/test_grouped.py::test_in_the_modules_group" in out, out
    assert "PASSED tests/e2e/test_grouped.py::test_in_its_own_group" in out, out
