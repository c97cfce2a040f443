"""How the suites run: which tests may open sockets, what `make test-fast` runs, and how
pytest-xdist shares the expensive fixtures between its workers.

Called from tests/conftest.py's ``pytest_collection_modifyitems``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# Unit tests run on the in-memory fakes: no socket but the Unix socket pair asyncio's event
# loop wakes itself with (``--allow-unix-socket`` in pyproject.toml). pytest-socket fails a
# unit test that opens any other, or looks a name up, before its fixtures run.
SOCKET_FREE = ("unit",)

# `make test-fast` runs unit and contract whole, and of the suites that start servers,
# browsers and synths only this slice: one test of each kind, a few seconds each. The rest
# of those suites is marked slow here (chaos, e2e and infra synths are marked in their files).
WHOLE_IN_FAST = ("unit", "contract")
FAST_SLICE = (
    # the REST API through its handlers on moto: submit, get, list, cancel, the 4xx paths
    "integration/test_api.py",
    # one job through a real worker and Chromium: steps, extract, screenshot, the record
    "worker/test_worker_e2e.py::test_job_succeeds_with_extracted_values_and_screenshot",
    # the lifecycle's retry path on the real worker
    "worker/test_worker_e2e.py::test_target_5xx_is_retried_then_fails_when_attempts_run_out",
    # the egress guard's decisions (no connection made)
    "worker/test_egress.py",
    # the infra checks that need no synth
    "infra/test_worker_scaling.py",
)

# Tests that share a session fixture run on one xdist worker (its synths: ~25 s each).
SHARED_PER_DIRECTORY = ("infra",)


def _suite_path(item: pytest.Item, tests_dir: Path) -> str | None:
    """``unit/test_x.py::test_y`` for a test under ``tests_dir``, else None."""
    try:
        relative = item.path.relative_to(tests_dir)
    except ValueError:
        return None
    return "::".join([relative.as_posix(), *item.nodeid.split("::")[1:]])


def _group(path: str) -> str:
    """With `--dist loadgroup`, one group runs on one worker: a module's tests share its
    module-scoped fixtures (a local stack, a site), a directory's its session ones."""
    module = path.split("::", 1)[0]
    suite = module.split("/", 1)[0]
    return suite if suite in SHARED_PER_DIRECTORY else module


def _own_group(item: pytest.Item) -> str | None:
    """The group a test names itself (``@pytest.mark.xdist_group("...")``): a test that
    uses none of its module's shared fixtures, e.g. one that starts its own stack, runs
    beside the module's other tests instead of after them."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def item_group(item: pytest.Item, tests_dir: Path) -> str:
    """The xdist group ``item`` runs in: the one it names, the shared stack's if it uses
    that stack, else its module's (``_group``)."""
    if own := _own_group(item):
        return own
    if SHARED_STACK_FIXTURE in getattr(item, "fixturenames", ()):
        module = (_suite_path(item, tests_dir) or "").split("::", 1)[0]
        return SHARED_STACK_2 if module in ON_SECOND_STACK else SHARED_STACK
    return _group(_suite_path(item, tests_dir) or "")


def _in_slice(path: str) -> bool:
    return any(path == entry or path.startswith(entry + "::") for entry in FAST_SLICE)


def check_fast_slice(tests_dir: Path) -> None:
    """A renamed or moved file would drop out of the slice unnoticed: say so instead."""
    missing = [e for e in FAST_SLICE if not (tests_dir / e.split("::")[0]).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/support/suites.py FAST_SLICE names no file: {missing}")


def mark_suites(items: list[pytest.Item], tests_dir: Path) -> None:
    for item in items:
        path = _suite_path(item, tests_dir)
        if path is None:
            continue
        suite = path.split("/", 1)[0]
        if suite in SOCKET_FREE:
            item.add_marker(pytest.mark.disable_socket)
        if suite not in WHOLE_IN_FAST and not _in_slice(path):
            item.add_marker(pytest.mark.slow)
        if _own_group(item) is None:  # pytest-xdist would join both names into one group
            item.add_marker(pytest.mark.xdist_group(item_group(item, tests_dir)))


# The e2e modules that ask for no other configuration share one local stack
# (tests/e2e/conftest.py): every test that uses it runs in one group, so on one worker,
# one after another, and the stack starts once for them all.
SHARED_STACK_FIXTURE = "shared_stack"
SHARED_STACK = "e2e/shared-stack"
# Their modules are split between two such stacks, each a group: on three workers one
# group of ~15 minutes was the run's longest path. A stack costs ~15 s of CPU to start; a
# module named here runs on the second (the first gets every other, new ones included).
SHARED_STACK_2 = "e2e/shared-stack-2"
ON_SECOND_STACK = (
    "e2e/test_console.py",
    "e2e/test_readme.py",
    "e2e/test_irreversible_e2e.py",
    "e2e/test_monitors.py",
    "e2e/test_requests_e2e.py",
    "e2e/test_local_iam_e2e.py",
)

# The tests that start a whole stack of their own (tests/e2e/test_local_stack.py): each its
# own group, so neither waits for its module's shared stack nor holds it up.
DEMO_COMMAND = "e2e/demo-command"
STACK_STOP = "e2e/stack-stop"

# xdist hands the groups out in collection order (``keep_collection_order`` turns off its
# own reorder, which puts the groups with the most tests first, a one-test group last);
# the longest should not start last: then the run lasts about its sum of test time / 3;
# else add the tail of the last long group.
# Longest first, as measured in a whole run on three workers (2026-12-05, seconds of test
# time under the run's own load: scripts/test_schedule.py): the shared stacks' modules
# (263, 151), the tenancy stack (175), order chaos (144; 24 orders now, 42 s alone), the
# browser lifecycle (297 with 200 jobs; 40 now, 29 s in a CI run), the API fuzz (116), process
# faults (116), the worker suite's module (106), then 60-80 s each. Other groups that
# start a browser or a stack (marked e2e) come next, then the rest. Only the order
# changes: a name missing here costs time, not coverage.
LONGEST_FIRST = (
    SHARED_STACK_2,
    "e2e/test_tenancy_e2e.py",
    SHARED_STACK,
    "chaos/test_irreversible_chaos.py",
    "worker/test_browser_lifecycle.py",
    "integration/test_api_fuzz.py",
    "chaos/test_process_faults.py",
    "worker/test_worker_e2e.py",
    "worker/test_irreversible_worker.py",
    "e2e/test_expiring_credentials_e2e.py",
    "e2e/test_live_runs.py",
    "chaos/test_aws_faults.py",
    DEMO_COMMAND,
)


def keep_collection_order(config: pytest.Config) -> None:
    """pytest-xdist's loadgroup hands the groups out by their number of tests, most first
    (its ``--loadscope-reorder``, on by default), which would undo ``order_for_workers``:
    the groups go out in collection order instead. Set beside the order it keeps, for
    every run that loads tests/conftest.py however pytest is called."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def order_for_workers(items: list[pytest.Item], tests_dir: Path) -> None:
    """Sort ``items`` in place (stable) so the longest groups go to the workers first."""
    heavy: set[str] = set()
    for item in items:
        if item.get_closest_marker("e2e"):
            heavy.add(item_group(item, tests_dir))

    def rank(item: pytest.Item) -> int:
        group = item_group(item, tests_dir)
        if group in LONGEST_FIRST:
            return LONGEST_FIRST.index(group)
        return len(LONGEST_FIRST) + (0 if group in heavy else 1)

    items.sort(key=rank)


def check_groups_applied(config: pytest.Config, ids: list[str]) -> None:
    """Stop the run when ``--dist loadgroup`` would not keep a group on one worker.

    pytest-xdist tells its scheduler a test's group by appending ``@group`` to the node id
    (every test here has a group: ``mark_suites``). pytest 9.2 made that write a no-op
    (pytest-xdist#1386): each module's tests were spread over both workers, each starting
    its own copy of the module's local stack, and only tests that read state their module
    built earlier failed, now and then.
    """
    if config.getvalue("dist") != "loadgroup" or not ids:
        return
    # The scheduler's own reading (``LoadGroupScheduling._split_scope``): a group is an ``@``
    # after the last ``]``, so an ``@`` inside a parameter's id is not one.
    lost = [nodeid for nodeid in ids if nodeid.rfind("@") <= nodeid.rfind("]")]
    if lost:
        pytest.exit(
            f"pytest-xdist did not record the test groups (e.g. {lost[0]}): --dist loadgroup "
            "would split modules across workers; check the pytest and pytest-xdist versions",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
