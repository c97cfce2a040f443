"""The walk of one job through the worker: the modules its run passes, from the runner's entry.

    .venv/bin/python bench/job_walk.py

One process, everything on 127.0.0.1 (as bench/job_path.py: a moto server, the API handler,
a worker built by its entry point with real Chromium, a page). A profile hook follows the
job's own work on the worker's event loop: the run's task from ``JobRunner.run``'s entry for
this job and the tasks it starts (a context variable marks them), leaving out the observers
and watchers beside it (``browser_task.observe``, the cancel watch, the slot's lease) and
what they call, and the threads the run hands blocking calls to; a coroutine resuming after
an await is not a new call. The walk is the sequence of stages the work is in (a stage: a
module of the worker, or the core's templating; the core's value types and rules it uses,
such as models, steps, events and masking, belong to the stage that calls them), one entry
per change of stage, from the runner's entry until the first step's handler starts:

- **stops**: the moves along it (into a stage by a call, or back by a return);
- **returns**: the moves that are returns;
- **climbs back**: calls back into a stage the walk had left by returning, from a stage it
  reached later: the run handing the job back up (e.g. the step loop calling into the
  preparation again);
- **templating after the plan**: calls into ``pagefleet.workflow.templating`` from the first
  step to the job's end (the run rendering what its preparation should have);
- **preparation after the plan**: calls into ``browser_task.run.prepare`` (rendering,
  resolving a secret, loading a saved login, reading a policy) from the first step on;
- **moves between any two of our modules**: the finer count, every change of module on
  the call stack (the core's values and rules too), to the first step.

Prints the walk and the figures; exits 1 when the job did not succeed, a climb back came
before the first step, or anything was rendered or prepared after the plan
(``tests/worker/test_job_walk.py`` holds the same on a job with inputs and secrets).
"""

from __future__ import annotations

import asyncio
import contextvars
import dis
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import Measured  # noqa: E402
from bench.job_path import TENANT, site, start_local_aws, submit_event  # noqa: E402

OURS = tuple(f"{ROOT / name}{os.sep}" for name in ("pagefleet", "browser_task"))
# Observers and watchers beside the job's work: they run for it, not as its way.
BESIDE = ("browser_task.observe.", "browser_task.run.cancel_watch", "browser_task.slot.")
STEP_HANDLERS = "browser_task.run.steps."
TEMPLATING = "pagefleet.workflow.templating"
PREPARE = "browser_task.run.prepare"
_RETURN = dis.opmap["RETURN_VALUE"]
# Set in the run's own task when the runner starts this job: the tasks it starts copy it.
_WALKING: contextvars.ContextVar[bool] = contextvars.ContextVar("walking", default=False)


def _module(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", "?"))


def _beside(frame: FrameType | None) -> bool:
    """In an observer or watcher, or in what one of them called."""
    for _ in range(64):
        if frame is None:
            return False
        if _module(frame).startswith(BESIDE):
            return True
        frame = frame.f_back
    return False


def _finished(frame: FrameType) -> bool:
    """A return event that ends the frame (not a coroutine suspending at an await)."""
    if not frame.f_code.co_flags & (0x80 | 0x20 | 0x200):  # coroutine, generator, async gen
        return True
    return frame.f_code.co_code[frame.f_lasti] == _RETURN


@dataclass
class Walk:
    job_id: str
    thread: int | None = None
    walk: list[tuple[str, str]] = field(default_factory=list)  # (module, "call"/"return")
    climbs: list[tuple[int, str, str]] = field(default_factory=list)  # (at, from, to)
    templating_after_plan: int = 0
    prepare_after_plan: int = 0
    # Moves between any two of our modules (values and rules included), to the first step.
    every_module: int = 0
    at_first_step: int | None = None  # len(walk) when the first handler started
    _stack: list[str] = field(default_factory=list)  # our modules, innermost last
    _left: set[str] = field(default_factory=set)  # modules the walk returned out of
    _frames: set[int] = field(default_factory=set)
    _order: list[str] = field(default_factory=list)  # modules by their first entry

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return") or threading.get_ident() != self.thread:
            return
        if not frame.f_code.co_filename.startswith(OURS):
            return
        module = _module(module_frame := frame)
        if not _WALKING.get():
            if event == "call" and frame.f_code.co_qualname == "JobRunner.run":
                job = frame.f_locals.get("job")
                if getattr(job, "job_id", None) == self.job_id:
                    _WALKING.set(True)
                    self._frames.add(id(frame))
                    self._stack.append(module)
                    self._order.append(module)
                    self.walk.append((module, "call"))
            return
        if _beside(frame):
            return
        if event == "call":
            if id(module_frame) in self._frames:
                return  # a coroutine resumed
            self._frames.add(id(module_frame))
            self._enter(module)
        elif _finished(frame):
            self._frames.discard(id(frame))
            self._leave(module)

    def _stage(self) -> str | None:
        """The innermost stage the work is in (the core's values and rules are not)."""
        return next((m for m in reversed(self._stack) if _is_stage(m)), None)

    def _enter(self, module: str) -> None:
        caller = self._stage()
        if self.at_first_step is None and self._stack and self._stack[-1] != module:
            self.every_module += 1
        self._stack.append(module)
        if self.at_first_step is None and module.startswith(STEP_HANDLERS):
            self.at_first_step = len(self.walk)
        if module == TEMPLATING and self.at_first_step is not None:
            self.templating_after_plan += 1
        if module == PREPARE and self.at_first_step is not None:
            self.prepare_after_plan += 1
        if not _is_stage(module) or module == caller:
            return
        if module not in self._order:
            self._order.append(module)
        elif caller is not None and self._climb(caller, module):
            self.climbs.append((len(self.walk), caller, module))
        self.walk.append((module, "call"))

    def _climb(self, caller: str, module: str) -> bool:
        """Back into a stage the walk had left, from one it reached later: the run handing
        the job back up."""
        if module not in self._left or module in self._stack[:-1]:
            return False
        return self._order.index(module) < self._order.index(caller)

    def _leave(self, module: str) -> None:
        if not self._stack:
            return
        left = self._stack.pop()
        if self.at_first_step is None and self._stack and self._stack[-1] != left:
            self.every_module += 1
        back = self._stage()
        if back is None and not self._stack:
            _WALKING.set(False)
            return
        if _is_stage(left) and back is not None and back != left:
            self._left.add(left)
            self.walk.append((back, "return"))


def _is_stage(module: str) -> bool:
    return module.startswith("browser_task.") or module == TEMPLATING


def main() -> int:
    stop = start_local_aws("walk")
    try:
        return walked(submit_event(site()))
    finally:
        stop()


def walked(event: dict[str, Any]) -> int:
    from browser_task.__main__ import build_worker
    from functions.api.handler import handler
    from pagefleet.specs.settings import WorkerSettings

    first = handler(event, None)  # a first job, unwalked: first imports, connections
    answer = handler(event, None)
    if answer["statusCode"] != 202:
        print(f"submit failed: {answer['statusCode']} {answer['body'][:200]}")
        return 1
    job_id = json.loads(answer["body"])["job_id"]
    jobs = [json.loads(first["body"])["job_id"], job_id]
    walk = Walk(job_id)
    worker = build_worker(WorkerSettings())
    stopped = threading.Event()

    def serve() -> None:
        walk.thread = threading.get_ident()
        sys.setprofile(walk)
        try:
            asyncio.run(worker.run())
        finally:
            sys.setprofile(None)
            stopped.set()

    threading.Thread(target=serve, name="worker", daemon=True).start()
    store = worker.lifecycle.store
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if all(store.get(TENANT, j).status.is_final for j in jobs):
            break
        time.sleep(0.2)
    worker.request_stop()
    stopped.wait(120)
    status = store.get(TENANT, job_id).status.value
    return report(walk, status)


# Issue 31: a plain job walks at most this many stops from the runner's entry to its first step.
GOAL_STOPS = 30


def report(walk: Walk, status: str) -> int:
    upto = walk.at_first_step if walk.at_first_step is not None else len(walk.walk)
    before = walk.walk[: upto + 1]
    print(f"job {walk.job_id}: {status}")
    print("the walk from JobRunner.run to the first step's handler:")
    for number, (module, how) in enumerate(before):
        print(f"  {number:3d} {'<-' if how == 'return' else '->'} {module}")
    stops = len(before) - 1
    returns = sum(1 for _, how in before[1:] if how == "return")
    climbs = climbs_to_first_step(walk)
    print(f"climbs back: {climbs or 'none'}")
    print(
        f"job walk: {stops} stops, {returns} returns, {len(climbs)} climbs back before the first "
        f"step; {walk.templating_after_plan} calls into the core's templating and "
        f"{walk.prepare_after_plan} into the preparation after it"
    )
    print(f"moves between any two of our modules (values and rules too): {walk.every_module}")
    downhill = not climbs and walk.templating_after_plan == walk.prepare_after_plan == 0
    short = stops <= GOAL_STOPS
    print(f"goal: at most {GOAL_STOPS} stops: {'met' if short else 'NOT met'}")
    return 0 if status == "succeeded" and downhill and short else 1


def climbs_to_first_step(walk: Walk) -> list[tuple[str, str]]:
    """The climbs back before the first step's handler (after it, the step loop reading the
    plan or the run's context is the run going on, not the job handed back up)."""
    upto = walk.at_first_step if walk.at_first_step is not None else len(walk.walk)
    return [(a, b) for at, a, b in walk.climbs if at <= upto]


def stops_to_first_step(walk: Walk) -> int:
    """The walk's stops from the runner's entry to the first step's handler."""
    upto = walk.at_first_step if walk.at_first_step is not None else len(walk.walk)
    return len(walk.walk[: upto + 1]) - 1


if __name__ == "__main__":
    with Measured("bench/job_walk.py"):
        code = main()
    sys.exit(code)
