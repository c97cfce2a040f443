"""The process tree of one launched browser: found by a marker switch, measured, killed.

Only processes found as descendants of this worker (the browser process carries a marker
switch on its command line) are ever signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import psutil

# How long a killed process may take to exit, and how often that is looked at.
DEATH_WAIT_S = 5.0
DEATH_POLL_S = 0.02


class TrackedTree(Protocol):
    process: psutil.Process | None
    known: dict[int, psutil.Process]


def find_browser_process(marker: str) -> psutil.Process | None:
    """The browser process of one launch: a descendant of this worker carrying the marker."""
    try:
        descendants = psutil.Process(os.getpid()).children(recursive=True)
    except psutil.Error:
        return None
    for proc in descendants:
        with contextlib.suppress(psutil.Error):
            cmdline = proc.cmdline()
            if marker in cmdline and not any(a.startswith("--type=") for a in cmdline):
                return proc
    return None


def watch_exit(process: psutil.Process | None, on_exit: Callable[[], None]) -> Callable[[], None]:
    """Call ``on_exit`` on the running loop as soon as ``process`` has exited (a pidfd that
    turns readable: no polling); returns how to stop watching. Where there is no pidfd, never
    (Playwright's ``disconnected`` still tells, only later)."""
    if process is None or not hasattr(os, "pidfd_open"):
        return _nothing
    try:
        fd = os.pidfd_open(process.pid)
    except OSError:
        return _nothing
    loop = asyncio.get_running_loop()
    open_fd = [fd]

    def stop() -> None:
        if open_fd:
            with contextlib.suppress(Exception):  # the loop may be closing
                loop.remove_reader(open_fd[0])
            os.close(open_fd.pop())

    def exited() -> None:
        if open_fd:  # once, whichever tells first
            stop()
            on_exit()

    loop.add_reader(fd, exited)
    # The pid named another process if ours had already gone (is_running checks its start).
    if not process.is_running():
        loop.call_soon(exited)
    return stop


def _nothing() -> None:
    pass


def remember_tree(generation: TrackedTree) -> int:
    """Refresh the generation's known processes; the summed RSS of the live tree.

    RSS counts pages shared between Chromium's processes once per process, so this
    overstates the true footprint; it is a consistent, cheap trigger for recycling.
    """
    root = generation.process
    if root is None:
        return 0
    try:
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in tree:
        generation.known.setdefault(proc.pid, proc)
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


def kill_tree(generation: TrackedTree) -> None:
    procs: dict[int, psutil.Process] = {}
    root = generation.process
    if root is not None:
        with contextlib.suppress(psutil.Error):
            if root.is_running():
                procs[root.pid] = root
                for child in root.children(recursive=True):
                    procs[child.pid] = child
    for pid, proc in list(generation.known.items()):
        # is_running() also checks the start time, so a recycled pid is never signalled.
        with contextlib.suppress(psutil.Error):
            if proc.is_running():
                procs.setdefault(pid, proc)
    killed = []
    for proc in procs.values():
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE:
                proc.kill()
                killed.append(proc)
    wait_dead(killed, DEATH_WAIT_S)
    reap_own_zombies(procs)
    generation.known.clear()


def wait_dead(procs: Iterable[psutil.Process], timeout_s: float) -> None:
    """Until each of ``procs`` has exited or ``timeout_s`` passed. A zombie has exited: its
    exit status is its parent's to collect (ours: ``reap_own_zombies``), and an orphan's
    parent is the system's init, which may take seconds, or forever, to get to it."""
    deadline = time.monotonic() + timeout_s
    left = list(procs)
    while left:
        left = [proc for proc in left if _running(proc)]
        if not left or time.monotonic() >= deadline:
            return
        time.sleep(DEATH_POLL_S)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def reap_own_zombies(procs: dict[int, psutil.Process]) -> None:
    """Collect exit statuses of those that are our own children (e.g. we are a subreaper)."""
    me = os.getpid()
    for pid, proc in procs.items():
        with contextlib.suppress(psutil.Error, ChildProcessError, OSError):
            if proc.ppid() == me:
                os.waitpid(pid, os.WNOHANG)
