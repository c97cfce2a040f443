"""The local stack's workers: ``python -m browser_task`` processes, each with the stack's
worker settings and as its pool's task role (``devstack.iam``), all stopped together.

Each worker has its own ECS agent stand-in (``devstack.ecs_agent``, as each Fargate task has
its agent): it protects its task from scale-in while jobs run, as on ECS."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from devstack.ecs_agent import EcsAgent
from devstack.iam.local import LocalIam
from devstack.local_settings import pool_worker_env
from devstack.processes import ManagedProcess, StopRequest, request_stop_all
from pagefleet.specs.pools import PoolOffer
from pagefleet.specs.resources import DEFAULT_POOL
from pagefleet.specs.settings import WORKER_PROCESS_ENV, WorkerSettings, env_name, to_env

REPO_ROOT = Path(__file__).resolve().parents[1]


class WorkerStartFailed(RuntimeError):
    """A worker exited as it started; the message carries its log's tail."""


class LocalWorkers:
    def __init__(self, log_dir: Path, extra_env: Mapping[str, str]) -> None:
        self._log_dir = log_dir
        # Over every worker's environment (a chaos run's fault rate, a test's setting).
        self._extra_env = dict(extra_env)
        self.processes: list[ManagedProcess] = []
        # Each worker's id -> the pool it serves, and its task's ECS agent.
        self.pools: dict[str, str] = {}
        self.agents: dict[str, EcsAgent] = {}
        self._stopping: StopRequest | None = None
        self._started_at = 0.0

    def start_all(
        self,
        settings: WorkerSettings,
        iam: LocalIam,
        count: int,
        others: tuple[PoolOffer, ...],
    ) -> None:
        """``count`` workers of the standard pool, and one small worker for each pool of
        ``others`` (with that pool's isolation); ``check_started`` says whether one exited
        at once."""
        if count and not (REPO_ROOT / "browser_task" / "__main__.py").exists():
            raise WorkerStartFailed("the worker (browser_task/__main__.py) is not in this checkout")
        for _ in range(count):
            self.start(settings, iam)
        for offer in others:
            if offer.name != DEFAULT_POOL:
                self.start(settings, iam, pool_worker_env(offer))
        self._started_at = time.monotonic()

    def check_started(self, settle_s: float = 0.5) -> None:
        """Raises if a worker exited at start: looked at ``settle_s`` after ``start_all``
        (the stack starts its other parts meanwhile, so this rarely waits)."""
        time.sleep(max(0.0, self._started_at + settle_s - time.monotonic()))
        for proc in self.processes:
            if not proc.alive():
                raise WorkerStartFailed(f"{proc.name} exited at start:\n{proc.tail()}")

    def start(
        self,
        settings: WorkerSettings,
        iam: LocalIam,
        extra_env: Mapping[str, str] | None = None,
    ) -> ManagedProcess:
        """One more worker with the next free index, ``local-worker-<index>``; ``extra_env``
        goes over the stack's (a ``PAGEFLEET_POOL`` there makes it that pool's, with its
        task role)."""
        index = len(self.processes)
        env = self.environment(settings, iam, index, extra_env)
        worker_id = env[env_name(WorkerSettings, "worker_id")]
        self.pools[worker_id] = env[env_name(WorkerSettings, "pool")]
        agent = self.agents[worker_id] = EcsAgent()
        env["ECS_AGENT_URI"] = agent.start()
        proc = ManagedProcess(
            f"worker-{index}",
            [sys.executable, "-m", "browser_task"],
            env=env,
            log_path=self._log_dir / f"worker-{index}.log",
            cwd=REPO_ROOT,
        )
        self.processes.append(proc)
        return proc

    def environment(
        self,
        settings: WorkerSettings,
        iam: LocalIam,
        index: int,
        extra_env: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """The environment of worker ``index``: this process's, the stack's settings, the
        worker's process environment as the image and the task definition set it, the
        extras, and its pool's task role."""
        env = dict(os.environ)
        env.update(to_env(settings))
        env["PAGEFLEET_WORKER_ID"] = f"local-worker-{index}"
        env["PAGEFLEET_ALLOW_LOOPBACK"] = "true"
        env["PYTHONUNBUFFERED"] = "1"
        env.update(WORKER_PROCESS_ENV)
        env.update(self._extra_env)
        env.update(extra_env or {})
        env.update(iam.env(f"worker/{env[env_name(WorkerSettings, 'pool')]}"))
        return env

    def request_stop(self) -> None:
        """SIGTERM to every worker now: they drain while the caller stops the rest of the
        stack; ``stop`` then waits for them."""
        self._stopping = request_stop_all(self.processes)

    def stop(self, grace_s: float = 15) -> None:
        """Every worker started, killed ones included (safe to call twice)."""
        processes, self.processes = self.processes, []
        stopping, self._stopping = self._stopping, None
        if stopping is None or stopping.processes != tuple(processes):
            stopping = request_stop_all(processes)
        stopping.finish(grace_s)
        agents, self.agents = self.agents, {}
        for agent in agents.values():
            agent.stop()
