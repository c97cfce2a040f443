"""A worker pool's settings in a stage (``StageConfig.pools``, the deploy file's ``pools``):
its task size and slots, scaling, architecture and Spot, egress and isolation.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagefleet.specs.pools import POOL_NAME_PATTERN, Egress, Isolation


class DeployModel(BaseModel):
    """A deploy setting: unknown fields refused (a typo is an error, not a default), never
    changed once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class AgeStep(DeployModel):
    """Add ``add_tasks`` when the oldest queued job has waited at least ``age_seconds``."""

    # The oldest waiting job's age, in seconds, from which this step applies.
    age_seconds: int = Field(ge=1)
    # Tasks this step adds (each minute the age stays at or above it).
    add_tasks: int = Field(ge=1)


# A Secrets Manager secret by name or complete ARN (the pool's proxy).
ARN_OF_SECRETS = r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:"
SECRET_NAME_OR_ARN = rf"^({ARN_OF_SECRETS})?[A-Za-z0-9/_+=.@-]+$"


class PoolConfig(DeployModel):
    # The pool's own name: its queues' keys ("<name>", "<name>-high"...), its resources' ids
    # and what a job's ``pool`` names. Renaming a pool replaces its queues and service.
    name: str = Field(pattern=POOL_NAME_PATTERN)
    cpu: int = Field(description="Fargate CPU units per task (1024 = 1 vCPU)")
    # Fargate memory per task, MiB (a size Fargate allows with ``cpu``).
    memory_mib: int
    # Browser slots per task: each slot runs one job in its own BrowserContext.
    concurrency: int = Field(ge=1, le=64)
    # Contexts of jobs waiting for a person (await_human) a task keeps open outside its slots
    # (their slots run other jobs meanwhile); past it a waiting job keeps its slot. Each is
    # a Chromium context in the task's memory (docs/decisions.md, 2026-12-05); 0: none.
    max_waiting_contexts: int = Field(default=2, ge=0, le=32)
    # While a task runs no job, its worker makes one context ahead for the next job with
    # the default context options (a session's first step then waits for no new page:
    # docs/decisions.md, "The spare context comes back"); off: one idle renderer less.
    spare_context: bool = True
    # Tasks kept running when no job waits (0: the first job waits for a task to start).
    min_tasks: int = Field(ge=0)
    # The most tasks scaling starts (the Fargate vCPU quota must hold twice this during a
    # rolling deploy: make deploy-check).
    max_tasks: int = Field(ge=1)
    # Step scaling on ApproximateAgeOfOldestMessage (of waiting jobs: a claimed job's
    # message is deleted); steps must be increasing in age.
    age_steps: tuple[AgeStep, ...] = (
        AgeStep(age_seconds=30, add_tasks=1),
        AgeStep(age_seconds=120, add_tasks=2),
        AgeStep(age_seconds=300, add_tasks=4),
    )
    # Target tracking on visible messages per running task; defaults to the slot count.
    backlog_per_task: int | None = None
    # Seconds the step policy waits after a scale-out before another.
    step_cooldown_seconds: int = Field(default=60, ge=0)
    # Seconds target tracking waits after a scale-out before another.
    scale_out_cooldown_seconds: int = Field(default=60, ge=0)
    # Seconds target tracking waits after a scale-in before another.
    scale_in_cooldown_seconds: int = Field(default=300, ge=0)
    # Target tracking scales in only after 15 quiet minutes. When set, a step policy also
    # removes this share of the tasks each minute once the jobs queued and running per
    # task have stayed under half a task's slots for ``idle_minutes`` (bench/scale_sim.py).
    idle_scale_in_percent: int | None = Field(default=50, ge=1, le=100)
    # Minutes a pool must stay idle (see idle_scale_in_percent) before it scales in.
    idle_minutes: int = Field(default=3, ge=1, le=15)
    # A pool with min_tasks 0 starts this many tasks in the minute its first job waits, and
    # adds no more from that policy for the cooldown (the desired count's datapoint lags).
    from_zero_tasks: int = Field(default=1, ge=1)
    # Seconds after a start from zero before that policy starts more.
    from_zero_cooldown_seconds: int = Field(default=180, ge=60)
    # Fargate Spot capacity (about 70 % off, tasks stopped at two minutes' notice): x86_64
    # workers only, AWS places no ARM64 task on Spot (refused at synth).
    spot: bool = False
    # This pool's CPU architecture; null: the stage's worker_architecture. A Spot pool on a
    # Graviton stage sets "x86_64" here and the others keep Graviton's price.
    architecture: Literal["x86_64", "arm64"] | None = None
    # How this pool's tasks reach sites; null: the stage's egress. "nat": the stage's NAT
    # gateways (a stage whose egress is "nat"); "public": a public IP per task; "fixed_ip":
    # subnets of the pool's own behind its own NAT gateway and Elastic IP (one address, the
    # stack output PoolEgressIp<Name>); "proxy": the HTTP proxy in proxy_secret, from the
    # stage's subnets.
    egress: Egress | None = None
    # For egress "proxy": a Secrets Manager secret (name or ARN) holding
    # {"host", "port", "username", "password"}; read when a task starts.
    proxy_secret: str | None = Field(default=None, pattern=SECRET_NAME_OR_ARN, max_length=2048)
    # "task": one job per task (concurrency 1) and a fresh browser for each job; "shared":
    # the task's slots share one browser, each job in its own context.
    isolation: Isolation = "shared"

    @model_validator(mode="after")
    def _check(self) -> PoolConfig:
        if self.min_tasks > self.max_tasks:
            raise ValueError("min_tasks > max_tasks")
        if self.isolation == "task" and self.concurrency != 1:
            raise ValueError(
                f"pool {self.name}: isolation task runs one job per task: set concurrency 1"
            )
        if (self.egress == "proxy") != (self.proxy_secret is not None):
            raise ValueError(
                f'pool {self.name}: egress "proxy" and proxy_secret go together (the secret '
                "holds the proxy's host, port, username and password)"
            )
        ages = [s.age_seconds for s in self.age_steps]
        if ages != sorted(set(ages)) or not ages:
            raise ValueError("age_steps must be non-empty and strictly increasing in age")
        return self

    @property
    def backlog_target(self) -> int:
        return self.backlog_per_task or self.concurrency

    def age_intervals(self) -> list[tuple[int | None, int | None, int]]:
        """The step policy on the oldest message's age: (lower s, upper s, tasks to add).

        Below the first step nothing happens (scale-in is the backlog policy's, and task
        protection guards running jobs); each step runs to the next one's age.
        """
        steps = self.age_steps
        out: list[tuple[int | None, int | None, int]] = [(None, steps[0].age_seconds, 0)]
        for index, step in enumerate(steps):
            upper = steps[index + 1].age_seconds if index + 1 < len(steps) else None
            out.append((step.age_seconds, upper, step.add_tasks))
        return out

    @property
    def browser_rss_limit_mb(self) -> int:
        """When the worker recycles its browser: summed RSS of its process tree, which
        counts shared pages once per process and so overstates what the task uses
        (docs/decisions.md, "Worker sizing from the memory figures")."""
        return int(self.memory_mib * 0.8)

    @property
    def idle_load(self) -> float:
        """Jobs queued and running per task below which the pool counts as idle."""
        return self.concurrency / 2
