"""Profiles every thread of a Python, in thread CPU time, between two marks.

``bench/worker_python.py`` uses it two ways: in its own child (``ThreadProfiles`` and
``snapshot``), and in a worker the local stack starts, where a ``sitecustomize`` the bench
writes imports this module with ``PAGEFLEET_BENCH_PROFILE`` naming a file: then the main
thread and every thread started later are profiled, the first SIGUSR1 marks the start of
the measured jobs and the second writes, to that file, the process's CPU seconds and each
function's calls, own and cumulative seconds between the two (``install``).
"""

from __future__ import annotations

import cProfile
import json
import os
import resource
import signal
import threading
import time
from pathlib import Path
from typing import Any

Func = tuple[str, int, str]
Stats = dict[Func, tuple[int, float, float]]
ENV = "PAGEFLEET_BENCH_PROFILE"


class ThreadProfiles:
    """A cProfile in every thread started from now on (and this one, with ``here``),
    timed in that thread's CPU time."""

    def __init__(self, *, here: bool = False) -> None:
        self.profiles: list[cProfile.Profile] = []

        def start(_frame: Any, _event: str, _arg: Any) -> None:
            self._enable()  # replaces this hook for the thread

        threading.setprofile(start)
        if here:
            self._enable()

    def _enable(self) -> None:
        profile = cProfile.Profile(time.thread_time)
        self.profiles.append(profile)
        profile.enable()

    def snapshot(self) -> Stats:
        """Calls, own and cumulative seconds by function, summed over the threads."""
        total: Stats = {}
        for profile in list(self.profiles):
            profile.snapshot_stats()  # reads what is recorded, without stopping it
            for func, (_cc, nc, tt, ct, _callers) in profile.stats.items():
                calls, own, cumulative = total.get(func, (0, 0.0, 0.0))
                total[func] = (calls + nc, own + tt, cumulative + ct)
        return total

    def callers(self, pattern: str) -> dict[str, dict[str, int]]:
        """For each function whose ``path:line name`` contains ``pattern``: its callers'
        call counts so far (summed over the threads)."""
        found: dict[str, dict[str, int]] = {}
        for profile in list(self.profiles):
            profile.snapshot_stats()
            for func, (*_, callers) in profile.stats.items():
                name = f"{func[0]}:{func[1]} {func[2]}"
                if not any(part in name for part in pattern.split(",")):
                    continue
                into = found.setdefault(name, {})
                for caller, counts in callers.items():
                    key = f"{caller[0]}:{caller[1]} {caller[2]}"
                    into[key] = into.get(key, 0) + int(counts[0])
        return found


def difference(before: Stats, after: Stats) -> list[list[Any]]:
    """[path, line, name, calls, own s, cumulative s] of what ran between two snapshots."""
    rows = []
    for func, (calls, own, cumulative) in after.items():
        c0, o0, u0 = before.get(func, (0, 0.0, 0.0))
        if calls > c0 or own > o0:
            rows.append([*func, calls - c0, own - o0, cumulative - u0])
    return rows


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def install(out: Path, *, profile: bool = True) -> None:
    """Profile this process (``profile``: else only its CPU is read); SIGUSR1 marks the
    start, the next one writes ``out`` (and each later one ``out`` with ``.2.json``, ...
    for the window since the mark before)."""
    profiles = ThreadProfiles(here=True) if profile else None
    marks: list[tuple[float, Stats]] = []
    wanted = os.environ.get(ENV + "_CALLERS")  # whose callers to write too (a debugging aid)

    def mark(_signum: int, _frame: Any) -> None:
        marks.append((cpu_seconds(), profiles.snapshot() if profiles is not None else {}))
        if len(marks) >= 2:  # each later mark writes the window since the one before
            (cpu0, before), (cpu1, after) = marks[-2:]
            written: dict[str, Any] = {"cpu_s": cpu1 - cpu0, "rows": difference(before, after)}
            if wanted and profiles is not None:
                written["callers"] = profiles.callers(wanted)
            window = out if len(marks) == 2 else out.with_suffix(f".{len(marks) - 1}.json")
            window.write_text(json.dumps(written))

    signal.signal(signal.SIGUSR1, mark)


if os.environ.get(ENV):
    install(Path(os.environ[ENV]), profile=os.environ.get(ENV + "_MODE") != "cpu")
