"""SnapStart restore hooks: environments restored from one snapshot do not share state.

A restored environment is a copy of the snapshot's memory; ``os.fork`` makes the same kind
of copy, so two forked children play two environments restored from the parent's state.
Each runs what Lambda's runtime runs after a restore (the registered hooks, in order).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable

import pytest
import snapshot_restore_py

from functions import snapstart
from pagefleet.jobs.models import new_ulid
from pagefleet.runtime import RUNTIME

AT_MS = 1_790_000_000_000  # one millisecond both restored environments mint an id in


def run_restore_hooks() -> None:
    for func, args, kwargs in snapshot_restore_py.get_after_restore():
        func(*args, **kwargs)


def restored(environment: Callable[[], dict[str, object]], hooks: bool) -> list[dict[str, object]]:
    """What ``environment`` returns in two children forked from this process's state."""
    results = []
    # Python reseeds ``random`` in a forked child (a snapshot restore does not): the
    # children put the parent's state back first, as a restored memory image holds it.
    state = random.getstate()
    for _ in range(2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(read)
            try:
                random.setstate(state)
                if hooks:
                    run_restore_hooks()
                os.write(write, json.dumps(environment()).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            results.append(json.loads(pipe.read()))
        os.waitpid(pid, 0)
    return results


def draws() -> dict[str, object]:
    import ulid

    return {
        "jitter": random.random(),
        "id": str(ulid.ULID.from_timestamp(AT_MS / 1000)).lower(),
    }


@pytest.fixture(autouse=True)
def _snapshot_state() -> None:
    """The state an init leaves: a seeded generator, an id minted in the same millisecond."""
    import ulid

    snapstart.register(RUNTIME.reset)
    random.seed(7)
    ulid.ULID.from_timestamp(AT_MS / 1000)


@pytest.mark.parametrize("handler", ["functions.api.handler", "functions.authorizer.handler"])
def test_the_api_and_the_authorizer_register_the_restore_hook(handler: str) -> None:
    # A fresh interpreter, as Lambda's init: importing the handler module registers it.
    probe = (
        f"import {handler}, snapshot_restore_py; "
        "print([f'{f.__module__}.{f.__name__}' for f, _, _ in "
        "snapshot_restore_py.get_after_restore()])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert "functions.snapstart.after_restore" in done.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork to copy a process")
def test_restored_environments_draw_different_jitter_and_ids() -> None:
    first, second = restored(draws, hooks=True)
    assert first["jitter"] != second["jitter"]
    assert first["id"] != second["id"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork to copy a process")
def test_without_the_hook_restored_environments_would_repeat_each_other() -> None:
    first, second = restored(draws, hooks=False)
    assert first == second  # what the hook is for


def test_restore_drops_clients_made_before_the_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",  # no lookup of credentials anywhere
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    RUNTIME.reset()
    before = RUNTIME.client("dynamodb")
    assert RUNTIME.client("dynamodb") is before  # built once per environment
    run_restore_hooks()
    assert RUNTIME.client("dynamodb") is not before
    RUNTIME.reset()


def test_ids_minted_after_restore_are_still_ulids() -> None:
    run_restore_hooks()
    assert len(new_ulid()) == 26
