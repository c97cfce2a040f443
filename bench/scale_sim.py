"""Past one machine: the REAL worker scaling policy, simulated.

    .venv/bin/python bench/scale_sim.py [--stage prod] [--pool standard] [--jobs 10000]
        [--burst-s 300] [--job-s 10] [--long-jobs 100] [--few-long-jobs 3]
        [--long-job-s 1200] [--fargate-start-s 60] [--metric-lag-s 60]

The policy is read from ``infra/config.py`` (the stage's ``PoolConfig``: slots per task,
min/max tasks, the age steps through ``PoolConfig.age_intervals()`` — the intervals the CDK
construct deploys — the backlog-per-task target, the cooldowns and the start from zero),
and modelled as Application Auto Scaling runs it on AWS:

- CloudWatch publishes one datapoint a minute (oldest age, visible messages and desired
  tasks: Maximum for the age and the start from zero, Average otherwise), available
  ``--metric-lag-s`` after the minute ends;
- step scaling on the oldest age: its alarm (one period) adds the step's tasks each
  minute it stays in alarm; during the cooldown only a larger step adds the difference;
- target tracking on visible / running tasks: out when 3 datapoints in a row are above
  the target (to ``ceil(desired * metric / target)``), in when 15 in a row are below 90 %
  of it, each side with its cooldown; scale-out wins over scale-in;
- with ``idle_scale_in_percent``, a step policy removes that share of the tasks each
  minute once (waiting + running jobs) / running tasks stayed below half a task's slots for
  ``idle_minutes`` datapoints (Application Auto Scaling's rounding of percentages); each
  policy keeps its own cooldown, as Application Auto Scaling does;
- a pool at ``min_tasks`` 0 starts ``from_zero_tasks`` when a minute saw a waiting job and
  no desired task, then waits ``from_zero_cooldown_seconds``;
- the oldest-age alarm (``oldest_age_alarm_seconds``, 3 of 5 datapoints) is watched too;
- a new task takes ``--fargate-start-s`` to run jobs and is billed from its launch; a task
  chosen for scale-in stops once its running jobs are done (task scale-in protection).

Two queue signals are compared. Before: a job's message stayed in flight while the job ran,
so the oldest age counted running jobs from when they were sent, and no policy started a
pool from zero. Now: the message is deleted at the claim, so the age is of waiting jobs.

Jobs last ``--job-s`` (±20 %, seeded) and are taken first-come first-served by free slots.
Prints: a burst of short jobs (the policy with and without idle scale-in); long jobs, many
and a few the warm tasks can run (before and now: peak tasks against what the jobs need,
scale-outs while nothing waited, oscillation, the age alarm); and each stage's and pool's
first job (how long a job that arrives to an idle pool waits to start). Asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import statistics
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Measured

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from infra.config import STAGES
from infra.pool_config import PoolConfig

MINUTE = 60


@dataclass(frozen=True)
class Signal:
    name: str
    running_in_queue: bool  # a running job's message stays in flight (and ages)
    from_zero: bool  # the start-from-zero policy exists


BEFORE = Signal("before (message in flight while the job runs)", True, False)
NOW = Signal("now (message deleted at the claim)", False, True)


def alternative(pool: PoolConfig) -> tuple[str, PoolConfig]:
    """The other policy to compare with: the default without idle scale-in (the policy
    until 2026-11-30, docs/decisions.md), or with it when a stage turned it off."""
    if pool.idle_scale_in_percent is not None:
        return "without idle scale-in", pool.model_copy(update={"idle_scale_in_percent": None})
    return "with idle scale-in", pool.model_copy(update={"idle_scale_in_percent": 50})


@dataclass
class Task:
    launched: float
    ready_at: float
    slots: int
    busy: list[tuple[float, float]] = field(default_factory=list)  # (finish, sent) per job
    stopping: bool = False
    stopped: float | None = None

    def ready(self, now: float) -> bool:
        return now >= self.ready_at and self.stopped is None


@dataclass
class Result:
    drain_s: float
    delays: list[float]
    peak_tasks: int
    task_hours: float
    timeline: list[tuple[int, int, int]]  # (minute, desired, running) for a short plot
    changes: list[int] = field(default_factory=list)  # each change of desired, signed
    needless_outs: int = 0  # scale-outs while no job waited at all
    age_alarm_minutes: int = 0  # minutes the oldest-age alarm was in alarm

    @property
    def flaps(self) -> int:
        """Turns of the desired count beyond the one from scaling out to scaling back in
        (out, in, out again... is an oscillation)."""
        signs = [c > 0 for c in self.changes]
        return max(0, sum(a != b for a, b in itertools.pairwise(signs)) - 1)


def simulate(
    pool: PoolConfig,
    *,
    arrivals: list[float],
    job_s: float,
    fargate_start_s: float,
    metric_lag_s: float,
    signal: Signal = NOW,
    age_alarm_s: int = 900,
    seed: int = 7,
    horizon_s: float = 6 * 3600,
) -> Result:
    rng = random.Random(seed)
    pending = deque(sorted(arrivals))
    last_arrival = pending[-1] if pending else 0.0
    queue: deque[float] = deque()
    tasks = [Task(0.0, 0.0, pool.concurrency) for _ in range(pool.min_tasks)]
    desired = pool.min_tasks
    out = Result(0.0, [], len(tasks), 0.0, [])
    # Per-second observations, folded into one datapoint a minute.
    seen: dict[str, list[float]] = {k: [] for k in ("age", "visible", "running", "jobs", "desired")}
    # (available at, oldest age, visible avg, running tasks, jobs running, visible max, desired)
    datapoints: deque[tuple[float, ...]] = deque()
    tracking_high = tracking_low = idle = 0
    last_step_at, last_step_change = -math.inf, 0
    # Each policy has its own cooldown (Application Auto Scaling keeps them per policy).
    last_out_at, last_in_at, last_zero_at, last_idle_at = (-math.inf,) * 4
    breaching: deque[bool] = deque(maxlen=5)
    intervals = pool.age_intervals()
    target = pool.backlog_target

    def live() -> list[Task]:
        return [t for t in tasks if t.stopped is None and not t.stopping]

    def set_desired(new: int, now: float) -> None:
        nonlocal desired
        new = max(pool.min_tasks, min(pool.max_tasks, new))
        if new != desired:
            out.changes.append(new - desired)
            out.needless_outs += new > desired and not queue and not pending
        desired = new
        current = live()
        for _ in range(desired - len(current)):
            tasks.append(Task(now, now + fargate_start_s, pool.concurrency))
        surplus = len(current) - desired
        # ECS stops unprotected (idle) tasks first; protected ones when their jobs end.
        for task in sorted(current, key=lambda t: len(t.busy)):
            if surplus <= 0:
                break
            task.stopping = True
            surplus -= 1

    now = 0.0
    while now < horizon_s:
        while pending and pending[0] <= now:
            queue.append(pending.popleft())
        for task in tasks:
            if task.stopped is not None:
                continue
            done = [f for f, _ in task.busy if f <= now]
            if done:
                out.drain_s = max(out.drain_s, *done)
                task.busy = [(f, s) for f, s in task.busy if f > now]
            if task.stopping and not task.busy:
                task.stopped = now
                continue
            if task.ready(now) and not task.stopping:
                while queue and len(task.busy) < task.slots:
                    arrived = queue.popleft()
                    out.delays.append(now - arrived)
                    task.busy.append((now + job_s * rng.uniform(0.8, 1.2), arrived))
        running = sum(1 for t in tasks if t.ready(now))
        out.peak_tasks = max(out.peak_tasks, sum(1 for t in tasks if t.stopped is None))
        sent = [s for t in tasks if t.stopped is None for _, s in t.busy]
        oldest = ([queue[0]] if queue else []) + (sent if signal.running_in_queue else [])
        seen["age"].append(now - min(oldest) if oldest else 0.0)
        seen["visible"].append(len(queue))
        seen["running"].append(running)
        seen["jobs"].append(len(sent))
        seen["desired"].append(desired)

        if len(seen["age"]) == MINUTE:
            datapoints.append(
                (
                    now + 1 + metric_lag_s,
                    max(seen["age"]),
                    statistics.fmean(seen["visible"]),
                    statistics.fmean(seen["running"]),
                    statistics.fmean(seen["jobs"]),
                    max(seen["visible"]),
                    max(seen["desired"]),
                )
            )
            out.timeline.append((int(now // MINUTE), desired, running))
            seen = {k: [] for k in seen}
        while datapoints and datapoints[0][0] <= now:
            _, age, visible, running_avg, inflight, visible_max, desired_max = datapoints.popleft()
            per_task = running_avg if running_avg > 0 else 1
            breaching.append(age > age_alarm_s)
            out.age_alarm_minutes += sum(breaching) >= 3
            # Start from zero on the first waiting job.
            if (
                signal.from_zero
                and pool.min_tasks == 0
                and desired_max < 1
                and visible_max >= 1
                and now - last_zero_at >= pool.from_zero_cooldown_seconds
            ):
                set_desired(desired + pool.from_zero_tasks, now)
                last_zero_at = now
            # Step scaling on the oldest age.
            if age >= pool.age_steps[0].age_seconds:
                change = next(
                    c
                    for lo, hi, c in intervals
                    if (lo is None or age >= lo) and (hi is None or age < hi)
                )
                if now - last_step_at < pool.step_cooldown_seconds:
                    extra = change - last_step_change
                    if extra > 0:
                        set_desired(desired + extra, now)
                        last_step_change = change
                elif change > 0:
                    set_desired(desired + change, now)
                    last_step_at, last_step_change = now, change
            # Step scale-in when idle: jobs waiting and running per task.
            idle = idle + 1 if (visible + inflight) / per_task < pool.idle_load else 0
            if (
                pool.idle_scale_in_percent is not None
                and idle >= pool.idle_minutes
                and now - last_idle_at >= pool.step_cooldown_seconds
                and desired > pool.min_tasks
            ):
                set_desired(desired - percent_of(desired, pool.idle_scale_in_percent), now)
                last_idle_at = now
            # Target tracking on the backlog per running task.
            backlog = visible / per_task
            tracking_high = tracking_high + 1 if backlog > target else 0
            tracking_low = tracking_low + 1 if backlog < 0.9 * target else 0
            if tracking_high >= 3 and now - last_out_at >= pool.scale_out_cooldown_seconds:
                wanted = math.ceil(max(desired, 1) * backlog / target)
                if wanted > desired:
                    set_desired(wanted, now)
                    last_out_at = now
            elif (
                tracking_low >= 15
                and now - last_in_at >= pool.scale_in_cooldown_seconds
                and now - last_out_at >= pool.scale_out_cooldown_seconds
                and now - last_step_at >= pool.step_cooldown_seconds
            ):
                wanted = math.ceil(desired * backlog / target)
                if wanted < desired:
                    set_desired(wanted, now)
                    last_in_at = now
        drained = not pending and not queue and all(not t.busy for t in tasks)
        settled = sum(1 for t in tasks if t.stopped is None) <= pool.min_tasks
        if drained and settled and now > last_arrival:
            break
        now += 1.0
    out.task_hours = sum(
        ((t.stopped if t.stopped is not None else now) - t.launched) for t in tasks
    )
    out.task_hours /= 3600
    return out


def percent_of(capacity: int, percent: int) -> int:
    """Tasks a PercentChangeInCapacity step removes: Application Auto Scaling rounds a
    magnitude above 1 down and one below 1 up to 1."""
    exact = capacity * percent / 100
    return 1 if exact < 1 else math.floor(exact)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def describe(pool: PoolConfig) -> str:
    steps = ", ".join(f"{s.age_seconds}s:+{s.add_tasks}" for s in pool.age_steps)
    return (
        f"{pool.concurrency} slots/task, {pool.min_tasks}-{pool.max_tasks} tasks, age steps "
        f"[{steps}], backlog target {pool.backlog_target}/task, cooldowns step "
        f"{pool.step_cooldown_seconds}s out {pool.scale_out_cooldown_seconds}s "
        f"in {pool.scale_in_cooldown_seconds}s"
        + (
            f", idle scale-in -{pool.idle_scale_in_percent}% after {pool.idle_minutes} min"
            if pool.idle_scale_in_percent
            else ""
        )
    )


def evenly(jobs: int, over_s: float) -> list[float]:
    return [i * over_s / jobs for i in range(jobs)]


def side_by_side(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


def burst(args: argparse.Namespace, default: PoolConfig) -> None:
    print(
        f"1) {args.jobs} jobs of ~{args.job_s:.0f} s in {args.burst_s:.0f} s, then quiet; "
        f"stage {args.stage}, pool {args.pool}; Fargate start {args.fargate_start_s:.0f} s, "
        f"metrics {args.metric_lag_s:.0f} s late"
    )
    capacity = default.max_tasks * default.concurrency / args.job_s
    print(
        f"at most {capacity:.1f} jobs/s at max tasks: a drain takes at least "
        f"{args.jobs / capacity:.0f} s"
    )
    results = {}
    other_name, other = alternative(default)
    for name, pool in (("default", default), (f"alternative ({other_name})", other)):
        result = simulate(
            pool,
            arrivals=evenly(args.jobs, args.burst_s),
            job_s=args.job_s,
            fargate_start_s=args.fargate_start_s,
            metric_lag_s=args.metric_lag_s,
        )
        results[name] = result
        print(f"\n{name}: {describe(pool)}")
        print(
            f"  time to drain = {result.drain_s:.0f} s, queue delay p50 = "
            f"{pct(result.delays, 50):.0f} s, p99 = {pct(result.delays, 99):.0f} s, "
            f"peak tasks = {result.peak_tasks}, task-hours = {result.task_hours:.2f}"
        )
        marks = " ".join(f"{m}:{d}/{r}" for m, d, r in result.timeline[:14])
        print(f"  minute:desired/running  {marks} ...")
    d, a = results["default"], results[f"alternative ({other_name})"]
    print(
        f"\nalternative vs default: drain {a.drain_s / d.drain_s:.2f}x, p99 delay "
        f"{pct(a.delays, 99) / pct(d.delays, 99):.2f}x, task-hours "
        f"{a.task_hours / d.task_hours:.2f}x"
    )


def long_jobs(args: argparse.Namespace, pool: PoolConfig, alarm_s: int, n: int) -> None:
    length = args.long_job_s
    needed = min(pool.max_tasks, max(pool.min_tasks, math.ceil(n / pool.concurrency)))
    print(
        f"\n2) {n} jobs of ~{length / 60:.0f} min arriving in one minute, then quiet; stage "
        f"{args.stage}, pool {args.pool} ({pool.concurrency} slots/task, {pool.min_tasks}-"
        f"{pool.max_tasks} tasks): they need {needed} tasks; the oldest-age alarm is at "
        f"{alarm_s} s"
    )
    results = [
        simulate(
            pool,
            arrivals=evenly(n, 60),
            job_s=length,
            fargate_start_s=args.fargate_start_s,
            metric_lag_s=args.metric_lag_s,
            signal=signal,
            age_alarm_s=alarm_s,
        )
        for signal in (BEFORE, NOW)
    ]
    rows: list[tuple[str, ...]] = [("", BEFORE.name, NOW.name)]
    figures = {
        "peak tasks (they need)": lambda r: f"{r.peak_tasks} ({needed})",
        "scale-outs while no job waited": lambda r: str(r.needless_outs),
        "scale-outs / scale-ins": lambda r: (
            f"{sum(c > 0 for c in r.changes)} / {sum(c < 0 for c in r.changes)}"
        ),
        "oscillations (out<->in turns)": lambda r: str(r.flaps),
        "oldest-age alarm, minutes in alarm": lambda r: str(r.age_alarm_minutes),
        "queue delay p50 / p99": lambda r: f"{pct(r.delays, 50):.0f} s / {pct(r.delays, 99):.0f} s",
        "all done after": lambda r: f"{r.drain_s / 60:.1f} min",
        "task-hours": lambda r: f"{r.task_hours:.2f}",
    }
    rows += [(name, *(show(r) for r in results)) for name, show in figures.items()]
    side_by_side(rows)
    for signal, result in zip((BEFORE, NOW), results, strict=True):
        marks = " ".join(f"{m}:{d}" for m, d, _ in result.timeline[:26])
        print(f"  minute:desired, {signal.name.split()[0]}: {marks} ...")


def first_jobs(args: argparse.Namespace) -> None:
    """One job arriving to an idle pool, at each second of a minute: how long it waits."""
    print(
        "\n3) The first job to an idle pool: expected (mean over its arrival second in the "
        f"minute) and worst wait to start; Fargate start {args.fargate_start_s:.0f} s, "
        f"metrics {args.metric_lag_s:.0f} s late"
    )
    rows: list[tuple[str, ...]] = [("stage / pool", "tasks", BEFORE.name, NOW.name)]
    for stage, config in STAGES.items():
        for pool in config.pools:
            name = pool.name
            cells = []
            for signal in (BEFORE, NOW):
                waits = [
                    simulate(
                        pool,
                        arrivals=[float(second)],
                        job_s=args.job_s,
                        fargate_start_s=args.fargate_start_s,
                        metric_lag_s=args.metric_lag_s,
                        signal=signal,
                        horizon_s=second + 600,  # it has started by then
                    ).delays[0]
                    for second in range(MINUTE)
                ]
                cells.append(f"{statistics.fmean(waits):.0f} s (worst {max(waits):.0f} s)")
            rows.append((f"{stage} / {name}", f"{pool.min_tasks}-{pool.max_tasks}", *cells))
    side_by_side(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", default="prod", choices=sorted(STAGES))
    parser.add_argument("--pool", default="standard")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--burst-s", type=float, default=300)
    parser.add_argument("--job-s", type=float, default=10)
    parser.add_argument("--long-jobs", type=int, default=100)
    parser.add_argument("--few-long-jobs", type=int, default=3, help="the warm tasks' share")
    parser.add_argument("--long-job-s", type=float, default=1200)
    parser.add_argument("--fargate-start-s", type=float, default=60)
    parser.add_argument("--metric-lag-s", type=float, default=60)
    args = parser.parse_args(argv)
    config = STAGES[args.stage]
    default = config.pool(args.pool)
    burst(args, default)
    for n in (args.long_jobs, args.few_long_jobs):
        long_jobs(args, default, config.oldest_age_alarm_seconds, n)
    first_jobs(args)
    return 0


if __name__ == "__main__":
    with Measured("bench/scale_sim.py"):
        code = main()
    sys.exit(code)
