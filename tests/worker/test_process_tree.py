"""A browser's process tree is killed and waited for until every process in it is dead, and
no longer: a zombie is dead already, its exit status only its parent's to collect.

When a browser closes, its helper processes are re-parented to the system's init, which
collects them when it gets to it (on the test machine a second or two later; an init that
never does would have held every stop for the whole wait)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import psutil
import pytest

from browser_task.browser import process_tree
from browser_task.browser.process_tree import kill_tree
from devstack.chaos import wait_until

# Starts a child that exits at once and one that sleeps, prints their pids, and collects
# neither: it only waits for its standard input to close.
HOLDER = """
import subprocess, sys
dead = subprocess.Popen([sys.executable, "-c", "pass"])
live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(dead.pid, live.pid, flush=True)
sys.stdin.read()
"""


@dataclass
class Tree:
    process: psutil.Process | None = None
    known: dict[int, psutil.Process] = field(default_factory=dict)


@pytest.fixture
def holder() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(30)


def _state(proc: psutil.Process) -> str:
    try:
        return str(proc.status())
    except psutil.NoSuchProcess:
        return "gone"


def test_kill_tree_kills_the_live_and_does_not_wait_on_the_dead_it_cannot_collect(
    holder: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Waiting on a zombie until its parent collects it would outlast this test's deadline.
    monkeypatch.setattr(process_tree, "DEATH_WAIT_S", 3600.0)
    assert holder.stdout is not None
    dead_pid, live_pid = map(int, holder.stdout.readline().split())
    dead, live = psutil.Process(dead_pid), psutil.Process(live_pid)
    wait_until(lambda: _state(dead) == psutil.STATUS_ZOMBIE, 60, poll=0.05, what="a zombie")
    tree = Tree(known={dead_pid: dead, live_pid: live})

    done = threading.Thread(target=kill_tree, args=(tree,), daemon=True)
    done.start()
    done.join(120)

    assert not done.is_alive(), "kill_tree waited on a process that had already exited"
    assert _state(live) in (psutil.STATUS_ZOMBIE, "gone")  # killed: dead, its parent's to collect
    assert _state(dead) == psutil.STATUS_ZOMBIE  # never collected by its parent meanwhile
    assert holder.poll() is None  # only the tree's own processes were signalled
    assert tree.known == {}
