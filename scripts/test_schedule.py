"""Where a `make test` run's wall time went: per xdist group and per worker, from its log.

    .venv/bin/pytest -n 3 --dist loadgroup -v --durations=0 > run.log
    .venv/bin/python scripts/test_schedule.py run.log [--workers 3] [--top 25]

With ``--dist loadgroup`` a group's tests run on one worker one after another, so the run
lasts at least as long as its longest group (the critical path), and a long group handed out
late makes a tail. From ``-v`` (which worker ran each test, in the order they ended) and
``--durations=0`` (setup, call and teardown of each test) this prints each worker's busy time
and its groups in order, the longest groups, and what pytest-xdist's scheduler would take
with the groups handed out longest first (tests/support/suites.py ``LONGEST_FIRST``).
Durations are those of the run, under its own load: a figure to compare runs by, not a
promise for a quiet machine.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

_RESULT = re.compile(r"^\[(gw\d+)\] \[\s*\d+%\] (?:PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) (\S+)")
_DURATION = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(\S+)")
# A node id as pytest-xdist names it under --dist loadgroup: ``path::test@group``.
_GROUP = re.compile(r"@([^\]@]+)$")
# pytest-xdist gives a worker more work when at most this many of its tests are pending.
_PREFETCH = 2


@dataclass
class Run:
    durations: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    by_worker: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def group(self, nodeid: str) -> str:
        found = _GROUP.search(nodeid)
        return found.group(1) if found else nodeid.split("::", 1)[0]

    def groups(self) -> dict[str, list[str]]:
        """Each group's tests, in the order they ran."""
        out: dict[str, list[str]] = defaultdict(list)
        for tests in self.by_worker.values():
            for nodeid in tests:
                out[self.group(nodeid)].append(nodeid)
        return out


def read_log(path: Path) -> Run:
    run = Run()
    for line in path.read_text(errors="replace").splitlines():
        if found := _RESULT.match(line):
            run.by_worker[found.group(1)].append(found.group(2))
        elif found := _DURATION.match(line):
            run.durations[found.group(3)] += float(found.group(1))
    return run


def simulate(
    units: list[tuple[str, list[float]]], workers: int
) -> tuple[float, dict[int, list[str]]]:
    """pytest-xdist's LoadScopeScheduling on these units (groups, in the order handed out):
    each worker gets one, then another whenever it has at most two tests pending."""
    queue = list(units)
    pending: list[list[float]] = [[] for _ in range(workers)]
    taken: dict[int, list[str]] = defaultdict(list)
    clock = [0.0] * workers

    def give(worker: int) -> None:
        if queue:
            name, times = queue.pop(0)
            pending[worker].extend(times)
            taken[worker].append(name)

    for worker in range(workers):
        give(worker)
    for worker in range(workers):
        if len(pending[worker]) <= _PREFETCH:
            give(worker)
    while any(pending):
        # The worker whose current test ends first.
        worker = min(
            (w for w in range(workers) if pending[w]), key=lambda w: clock[w] + pending[w][0]
        )
        clock[worker] += pending[worker].pop(0)
        if len(pending[worker]) <= _PREFETCH:
            give(worker)
    return max(clock), taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    run = read_log(args.log)
    groups = run.groups()
    total = {name: sum(run.durations.get(t, 0.0) for t in tests) for name, tests in groups.items()}

    print("worker  busy s  tests  groups in the order they ran (s)")
    for worker, tests in sorted(run.by_worker.items()):
        busy = sum(run.durations.get(t, 0.0) for t in tests)
        order: list[str] = []
        for nodeid in tests:
            if not order or order[-1] != run.group(nodeid):
                order.append(run.group(nodeid))
        big = ", ".join(f"{g} {total[g]:.0f}" for g in order if total[g] >= 20)
        print(f"{worker:6} {busy:7.0f} {len(tests):6}  {big}")

    print(f"\nthe {args.top} longest groups (s, tests):")
    for name, seconds in sorted(total.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {seconds:7.1f} {len(groups[name]):5}  {name}")
    everything = sum(total.values())
    share = everything / args.workers
    print(f"\nsum of test time {everything:.0f} s; / {args.workers} = {share:.0f} s")

    by_length = sorted(groups, key=lambda g: -total[g])
    units = [(g, [run.durations.get(t, 0.0) for t in groups[g]]) for g in by_length]
    wall, _ = simulate(units, args.workers)
    print(f"longest first, simulated: {wall:.0f} s of test time on the slowest worker")
    by_count = sorted(groups, key=lambda g: -len(groups[g]))
    units = [(g, [run.durations.get(t, 0.0) for t in groups[g]]) for g in by_count]
    wall, _ = simulate(units, args.workers)
    print(f"most tests first (pytest-xdist's default reorder), simulated: {wall:.0f} s")


if __name__ == "__main__":
    main()
