"""Past one machine: a burst through the REAL worker scaling policy, simulated.

    .venv/bin/python bench/scale_sim.py [--stage prod] [--pool standard] [--jobs 10000]
        [--burst-s 300] [--job-s 10] [--fargate-start-s 60] [--metric-lag-s 60]

The policy is read from ``infra/config.py`` (the stage's ``PoolConfig``: slots per task,
min/max tasks, the age steps through ``PoolConfig.age_intervals()`` — the intervals the CDK
construct deploys — the backlog-per-task target and the cooldowns), and modelled as
Application Auto Scaling runs it on AWS:

- CloudWatch publishes one datapoint a minute (oldest age: Maximum; visible messages and
  running tasks: Average), available ``--metric-lag-s`` after the minute ends;
- step scaling on the oldest age: its alarm (one period) adds the step's tasks each
  minute it stays in alarm; during the cooldown only a larger step adds the difference;
- target tracking on visible / running tasks: out when 3 datapoints in a row are above
  the target (to ``ceil(desired * metric / target)``), in when 15 in a row are below 90 %
  of it, each side with its cooldown; scale-out wins over scale-in;
- with ``idle_scale_in_percent``, a step policy removes that share of the tasks each
  minute once (queued + running jobs) / running tasks stayed below half a task's slots for
  ``idle_minutes`` datapoints (Application Auto Scaling's rounding of percentages);
- a new task takes ``--fargate-start-s`` to run jobs and is billed from its launch; a task
  chosen for scale-in stops once its running jobs are done (task scale-in protection).

Jobs arrive evenly during the burst, last ``--job-s`` (±20 %, seeded), and are taken
first-come first-served by free slots. Prints time to drain, queue delay p50/p99, peak
tasks and task-hours for the default policy and the alternative below; asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infra.config import STAGES, PoolConfig

MINUTE = 60


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
    busy: list[float] = field(default_factory=list)  # finish times of running jobs
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


def simulate(
    pool: PoolConfig,
    *,
    jobs: int,
    burst_s: float,
    job_s: float,
    fargate_start_s: float,
    metric_lag_s: float,
    seed: int = 7,
    horizon_s: float = 6 * 3600,
) -> Result:
    rng = random.Random(seed)
    arrivals = deque(i * burst_s / jobs for i in range(jobs))
    queue: deque[float] = deque()
    tasks = [Task(0.0, 0.0, pool.concurrency) for _ in range(pool.min_tasks)]
    desired = pool.min_tasks
    delays: list[float] = []
    last_finish = 0.0
    # Per-second observations, folded into one datapoint a minute.
    minute_age: list[float] = []
    minute_visible: list[int] = []
    minute_running: list[int] = []
    minute_inflight: list[int] = []
    # (available at, oldest age, visible, running tasks, jobs running)
    datapoints: deque[tuple[float, float, float, float, float]] = deque()
    tracking_high = tracking_low = idle = 0
    last_step_at, last_step_change = -math.inf, 0
    last_out_at, last_in_at = -math.inf, -math.inf
    peak = len(tasks)
    timeline: list[tuple[int, int, int]] = []
    first_age = pool.age_steps[0].age_seconds
    intervals = pool.age_intervals()
    target = pool.backlog_target

    def live() -> list[Task]:
        return [t for t in tasks if t.stopped is None and not t.stopping]

    def set_desired(new: int, now: float) -> None:
        nonlocal desired
        desired = max(pool.min_tasks, min(pool.max_tasks, new))
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
        while arrivals and arrivals[0] <= now:
            queue.append(arrivals.popleft())
        for task in tasks:
            if task.stopped is not None:
                continue
            done = [f for f in task.busy if f <= now]
            if done:
                last_finish = max(last_finish, *done)
                task.busy = [f for f in task.busy if f > now]
            if task.stopping and not task.busy:
                task.stopped = now
                continue
            if task.ready(now) and not task.stopping:
                while queue and len(task.busy) < task.slots:
                    arrived = queue.popleft()
                    delays.append(now - arrived)
                    task.busy.append(now + job_s * rng.uniform(0.8, 1.2))
        running = sum(1 for t in tasks if t.ready(now))
        peak = max(peak, sum(1 for t in tasks if t.stopped is None))
        minute_age.append(now - queue[0] if queue else 0.0)
        minute_visible.append(len(queue))
        minute_running.append(running)
        minute_inflight.append(sum(len(t.busy) for t in tasks if t.stopped is None))

        if len(minute_age) == MINUTE:
            datapoints.append(
                (
                    now + 1 + metric_lag_s,
                    max(minute_age),
                    statistics.fmean(minute_visible),
                    statistics.fmean(minute_running),
                    statistics.fmean(minute_inflight),
                )
            )
            timeline.append((int(now // MINUTE), desired, running))
            minute_age, minute_visible, minute_running, minute_inflight = [], [], [], []
        while datapoints and datapoints[0][0] <= now:
            _, age, visible, running_avg, inflight = datapoints.popleft()
            per_task = running_avg if running_avg > 0 else 1
            # Step scaling on the oldest age.
            if age >= first_age:
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
            # Step scale-in when idle.
            idle = idle + 1 if (visible + inflight) / per_task < pool.idle_load else 0
            if (
                pool.idle_scale_in_percent is not None
                and idle >= pool.idle_minutes
                and now - last_step_at >= pool.step_cooldown_seconds
                and desired > pool.min_tasks
            ):
                set_desired(desired - percent_of(desired, pool.idle_scale_in_percent), now)
                last_step_at, last_step_change = now, 0
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
        drained = not arrivals and not queue and all(not t.busy for t in tasks)
        settled = sum(1 for t in tasks if t.stopped is None) <= pool.min_tasks
        if drained and settled and now > burst_s:
            break
        now += 1.0
    end = now
    task_hours = sum(((t.stopped if t.stopped is not None else end) - t.launched) for t in tasks)
    return Result(last_finish, delays, peak, task_hours / 3600, timeline)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", default="prod", choices=sorted(STAGES))
    parser.add_argument("--pool", default="standard")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--burst-s", type=float, default=300)
    parser.add_argument("--job-s", type=float, default=10)
    parser.add_argument("--fargate-start-s", type=float, default=60)
    parser.add_argument("--metric-lag-s", type=float, default=60)
    args = parser.parse_args(argv)

    default = STAGES[args.stage].pools[args.pool]
    print(
        f"{args.jobs} jobs of ~{args.job_s:.0f} s in {args.burst_s:.0f} s, then quiet; "
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
            jobs=args.jobs,
            burst_s=args.burst_s,
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
