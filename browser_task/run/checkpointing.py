"""An attempt's checkpoints of its irreversible steps, written as it runs
(docs/irreversible-steps.md).

``Progress`` keeps the attempt's word on its irreversible steps and writes it through the
lifecycle, fenced by the attempt: ``started`` before such a step acts, ``done`` when it
returned. A write that finds the lease lost stops the attempt (``AttemptLost``): another
attempt owns the job, and the step must not run here.

``started`` also renews the lease, and is refused once the lease has ended (heartbeats that
failed for a lease, the job not taken back yet): the step then acts within a lease of its own,
and its timeout ends before that lease does (``act_within_ms``), so the next attempt's check
cannot come before a click that was still on its way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from browser_task.errors import RetryJob, first_line
from pagefleet.backoff import Backoff, Jitter
from pagefleet.errors import LeaseLost
from pagefleet.jobs.checkpoints import (
    CHECKPOINT_LABEL_MAX,
    Checkpoint,
    CheckpointHow,
    CheckpointState,
    Compensation,
    pending,
    put,
    restate,
)
from pagefleet.jobs.models import iso
from pagefleet.jobs.record_size import clip
from pagefleet.jobs.rules import LEASE_MARGIN_S
from pagefleet.live.events import EventType

if TYPE_CHECKING:
    from browser_task.observe.run_events import RunEvents
    from pagefleet.jobs.lifecycle import Lifecycle
    from pagefleet.jobs.record import JobRecord

log = logging.getLogger("browser_task.run.checkpointing")

# An irreversible step stops trying to act this long before the lease its ``started``
# renewed ends: a click sent at its timeout's last moment reaches the site before the job
# can be taken back (the lease's end, then LEASE_GRACE_S).
ACT_MARGIN_S = 2
# A checkpoint write that fails for another reason than the lease is tried this often.
WRITE_TRIES = 3
WRITE_BACKOFF = Backoff(0.2, 0.8, Jitter.NONE)
Results = Callable[[], dict[str, Any]]


class AttemptLost(Exception):
    """A checkpoint write found the lease gone: another attempt owns the job. Stop, write
    nothing more; the new attempt settles the step (its check, or a person)."""


class CheckpointUnwritten(Exception):
    """The store did not take a checkpoint (not the lease: DynamoDB failed)."""


class Progress:
    """The attempt's checkpoints and compensation, as it will report them."""

    def __init__(
        self,
        lifecycle: Lifecycle,
        job: JobRecord,
        events: RunEvents | None = None,
        clock: Callable[[], float] | None = None,
        *,
        lease_s: int | None = None,
    ) -> None:
        self.lifecycle = lifecycle
        self.job = job
        self.events = events
        self._clock = clock or (lambda: lifecycle.clock.now())
        # The worker's lease: ``started`` renews it for this long (None: tools and tests
        # without a lease; nothing renewed, no timeout shortened).
        self._lease_s = lease_s
        # While an irreversible step acts: when it must have acted by (epoch seconds).
        self._act_by: float | None = None
        self.checkpoints: list[Checkpoint] = list(job.checkpoints)
        self.compensation: Compensation | None = None
        # Set while no irreversible step is acting: a cancel or a drain waits for it.
        self.idle = asyncio.Event()
        self.idle.set()

    @property
    def at_stake(self) -> bool:
        """Whether an irreversible step's effect is at stake in how this attempt ends."""
        return pending(self.checkpoints) is not None

    def view(self) -> list[Checkpoint] | None:
        """The checkpoints for the outcome's write (None: the job never had any)."""
        return list(self.checkpoints) if self.checkpoints else None

    def at(self) -> str:
        return iso(datetime.fromtimestamp(self._clock(), UTC))

    def act_within_ms(self, timeout_ms: int) -> int:
        """A step's timeout, shortened while an irreversible step acts to end before the
        lease its ``started`` renewed (less ``ACT_MARGIN_S``): a step that has not acted by
        then does not act at all."""
        if self._act_by is None:
            return timeout_ms
        left_ms = int((self._act_by - self._clock()) * 1000)
        return max(1, min(timeout_ms, left_ms))

    async def record(
        self,
        step: int,
        label: str,
        state: CheckpointState,
        how: CheckpointHow,
        result: dict[str, Any] | None,
        *,
        renew: bool = False,
    ) -> None:
        checkpoint = Checkpoint(
            step=step,
            label=clip(label, CHECKPOINT_LABEL_MAX),
            state=state,
            attempt=self.job.attempt,
            at=self.at(),
            how=how,
        )
        self.checkpoints = put(self.checkpoints, checkpoint)
        await self.write(result, renew=renew)
        if self.events is not None:  # once stored: an event never says more than the record
            self.events.emit(
                EventType.CHECKPOINT, index=step, label=checkpoint.label, state=state, how=how
            )

    async def write(self, result: dict[str, Any] | None = None, *, renew: bool = False) -> None:
        """Store the checkpoints (and compensation) as they are now (``renew``: and renew
        the lease, refused once it ended); ``AttemptLost`` when another attempt owns the
        job or the lease ended, ``CheckpointUnwritten`` when the store kept failing."""
        last: Exception | None = None
        for tries in range(WRITE_TRIES):
            try:
                await asyncio.to_thread(
                    self.lifecycle.record_progress,
                    self.job,
                    self.checkpoints,
                    result=dict(result) if result is not None else None,
                    compensation=self.compensation,
                    renew_lease_s=self._lease_s if renew else None,
                )
                return
            except LeaseLost as lost:
                raise AttemptLost(lost.message) from None
            except Exception as exc:
                last = exc
                await asyncio.sleep(WRITE_BACKOFF.delay(tries + 1))
        raise CheckpointUnwritten(first_line(str(last)))

    @contextlib.asynccontextmanager
    async def around(self, step: int, label: str, results: Results) -> AsyncIterator[None]:
        """An irreversible step: ``started`` written before it acts, ``done`` once it
        returned (a step that raised stays ``started``: its effect is unknown). Each write
        carries the results so far (``results()``), for an attempt that goes on after it."""
        began = self._clock()
        try:
            await self.record(step, label, "started", "ran", results(), renew=True)
        except CheckpointUnwritten as exc:
            # The write may have landed: the outcome says the step did not run.
            self.checkpoints = restate(self.checkpoints, step, "not_done", at=self.at())
            raise RetryJob(
                f"the checkpoint before this irreversible step could not be written ({exc}); "
                "the step did not run",
                kind="checkpoint_failed",
            ) from None
        if self._lease_s is not None:
            self._act_by = began + self._lease_s - LEASE_MARGIN_S - ACT_MARGIN_S
        self.idle.clear()
        try:
            try:
                yield  # a step that raises skips "done" below
            finally:
                self._act_by = None
            try:
                await self.record(step, label, "done", "ran", results())
            except CheckpointUnwritten as exc:  # the outcome's write carries it
                log.warning("checkpoint after step %s not written: %s", step, exc)
        finally:
            self.idle.set()

    async def settle(self, work: asyncio.Future[Any], bound_s: float) -> None:
        """Wait (at most ``bound_s``) for an irreversible step under way to finish and its
        checkpoint to be written, or for the run to end: a cancel or a drain never cuts
        such a step short when it can help it."""
        if self.idle.is_set() or work.done():
            return
        idle = asyncio.ensure_future(self.idle.wait())
        try:
            await asyncio.wait({idle, work}, timeout=bound_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            idle.cancel()
