"""Child processes of the local stack: started in their own process group, always reaped.

Each child gets SIGTERM first (the worker drains), then its whole process group gets
SIGKILL after a grace period, so a Chromium the worker launched cannot outlive it. On Linux
a child is also told to die with its parent (``PR_SET_PDEATHSIG``), covering a parent
killed with SIGKILL.

Caution: Linux ties ``PR_SET_PDEATHSIG`` to the *thread* that forked the child, not the
process: a child started from a short-lived thread is sent SIGTERM when that thread exits.
Start managed processes from a long-lived thread (the local stack starts them from the
thread that runs it).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

_PR_SET_PDEATHSIG = 1
# Loaded once in the parent: the child, between fork and exec, only makes the syscall.
_LIBC = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError):
        _LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ManagedProcess:
    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
        pass_fds: Sequence[int] = (),
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("ab")
        self.popen = subprocess.Popen(
            self.argv,
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: Ctrl-C reaches only us; we stop it
            preexec_fn=_die_with_parent,
            pass_fds=tuple(pass_fds),
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def descendants(self) -> list[Any]:
        try:
            import psutil  # optional: the local extras

            return list(psutil.Process(self.popen.pid).children(recursive=True))
        except Exception:  # psutil missing, or the process is gone already
            return []

    def stop(self, grace_s: float = 10.0, descendants: list[Any] | None = None) -> int | None:
        """SIGTERM, wait up to ``grace_s``, then SIGKILL the whole group; returns the exit code.

        Descendants in other process groups (Playwright starts Chromium detached) are
        collected before the signal and killed too if they outlive the child.
        """
        family = descendants if descendants is not None else self.descendants()
        try:
            if self.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(grace_s)
            # Anything left in the group (a browser, a driver) goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            if self.popen.poll() is None:
                self.popen.wait(5)
            _kill_survivors(family)
            return self.popen.returncode
        finally:
            self._log.close()


def _kill_survivors(processes: list[Any]) -> None:
    for proc in processes:
        with contextlib.suppress(Exception):
            if proc.is_running():
                proc.kill()
    with contextlib.suppress(Exception):  # psutil missing (the local extras), or gone
        import psutil

        psutil.wait_procs(processes, timeout=3)


@dataclass(frozen=True)
class StopRequest:
    """Processes sent SIGTERM, with their families as collected before the signal."""

    processes: tuple[ManagedProcess, ...]
    families: dict[str, list[Any]]

    def finish(self, grace_s: float = 10.0) -> None:
        """Wait up to ``grace_s`` for them all, then SIGKILL the stragglers."""
        deadline = time.monotonic() + grace_s
        for proc in self.processes:
            proc.stop(
                grace_s=max(0.0, deadline - time.monotonic()), descendants=self.families[proc.name]
            )


def request_stop_all(processes: Sequence[ManagedProcess]) -> StopRequest:
    """SIGTERM to everyone at once, without waiting: the caller stops other things while
    they drain, then calls ``finish``."""
    families = {proc.name: proc.descendants() for proc in processes}
    for proc in processes:
        if proc.alive():
            with contextlib.suppress(ProcessLookupError):
                proc.popen.send_signal(signal.SIGTERM)
    return StopRequest(tuple(processes), families)


def stop_all(processes: Sequence[ManagedProcess], grace_s: float = 10.0) -> None:
    """Stop in parallel: everyone gets SIGTERM at once, then the stragglers SIGKILL."""
    request_stop_all(processes).finish(grace_s)
