"""One attempt of one job in the browser: the worker's slot hands a claimed job here.

The run happens in a fresh browser context under the job's lease (``browser_task.slot.leases``:
kept by the worker from the claim until the outcome is written), a job-level watchdog, a
cancel watch and the worker's abort signal.
Whatever ends it, the answer is an ``Outcome`` for the lifecycle to write, or None when the
lease was lost (another attempt owns the job: write nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from browser_task.browser.pool import JobBrowser
from browser_task.egress.log import EgressLog, TrackedJob
from browser_task.errors import JobFailure, RetryJob, first_line
from browser_task.observe.reporting import with_step_times
from browser_task.observe.run_events import RunEvents
from browser_task.observe.screencast import live_view
from browser_task.observe.telemetry import JobLog
from browser_task.observe.usage import AttemptMeter
from browser_task.run import endings
from browser_task.run.cancel_watch import watch_cancel
from browser_task.run.checkpointing import AttemptLost
from browser_task.run.context import RunContext
from browser_task.run.early import EarlyContext
from browser_task.run.executor import run_workflow, step_text
from browser_task.run.failure import capture_failure_artifacts
from browser_task.run.inbox import WorkerInbox
from browser_task.run.monitoring import Baselines
from browser_task.run.opening import RunOpener
from browser_task.run.prepare import TenantPolicies
from browser_task.run.recordings import drop_recordings, keep_recordings
from browser_task.run.routing import with_metrics
from browser_task.run.signals import HeldLease, SlotSignals
from browser_task.run.spend import nothing_left, within_budgets
from browser_task.tenant.access import TenantData, TenantDataSource
from browser_task.tenant.artifacts import ArtifactCollector
from pagefleet.jobs.lifecycle import Lifecycle, Outcome
from pagefleet.jobs.preview import Preview
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.live.ports import ConnectionPoster
from pagefleet.specs.settings import WorkerSettings

if TYPE_CHECKING:
    from browser_task.run.session_loop import SessionStart
    from pagefleet.browsing.commands import CommandLedger
    from pagefleet.schedules.service import ScheduleStore


class JobRunner:
    def __init__(
        self,
        settings: WorkerSettings,
        lifecycle: Lifecycle,
        opener: RunOpener,
        *,
        tenant_data: TenantDataSource,
        policies: TenantPolicies | None,
        abort: asyncio.Event,
        egress_log: EgressLog,
        schedules: Callable[[], ScheduleStore] | None = None,
        session_inbox: WorkerInbox | None = None,
        session_commands: Callable[[], CommandLedger] | None = None,
        frames: ConnectionPoster | None = None,
    ) -> None:
        self.settings = settings
        self.lifecycle = lifecycle
        # Everything before the first step (browser_task.run.opening).
        self._opener = opener
        # Where a watched job's live view frames are posted (None: no live view).
        self._frames = frames
        # Where browser sessions' commands are woken and recorded (None: this worker runs
        # none); the ledger is made by a session's first job.
        self._session_inbox = session_inbox
        self._session_commands = session_commands
        # Artifacts, sessions and secrets of a job, through its tenant's own credentials.
        self._tenant_data = tenant_data
        self._policies = policies
        self._abort = abort
        self._egress_log = egress_log
        # Where a monitor's baseline is found (a schedule's pin or its last good run); the
        # schedules' store is made by a monitor's first job.
        self._baselines = Baselines(lifecycle.store, schedules, tenant_data, lifecycle.now)

    async def run(
        self,
        job: JobRecord,
        log: JobLog,
        lease: HeldLease,
        events: RunEvents | None = None,
        meter: AttemptMeter | None = None,
        signals: SlotSignals | None = None,
        early: EarlyContext | None = None,
    ) -> Outcome | None:
        """``lease``: the job's lease, kept by the worker until the outcome is written (the
        run stops, writing nothing, if it is lost). ``early``: the context opened while the
        job was claimed (browser_task.run.early); the run uses it, or closes it when the
        prepared run needs another."""
        signals = signals or SlotSignals()
        try:
            if job.spend_left_s() <= 0:  # before any browser work
                if early is not None:
                    await early.discard()
                return endings.refused(self.lifecycle, job, nothing_left(job))
            return await self._attempt(job, log, events, meter, signals, early, lease.lost)
        finally:
            signals.released.set()

    async def _attempt(
        self,
        job: JobRecord,
        log: JobLog,
        events: RunEvents | None,
        meter: AttemptMeter | None,
        signals: SlotSignals,
        early: EarlyContext | None,
        lease_lost: asyncio.Event,
    ) -> Outcome | None:
        try:
            data = await asyncio.to_thread(self._tenant_data, job.tenant_id)
        except Exception as exc:
            if early is not None:
                await early.discard()
            failure = RetryJob(
                f"the tenant's credentials are unavailable: {first_line(str(exc))}",
                kind="tenant_access_failed",
            )
            return endings.refused(self.lifecycle, job, failure)
        collector = ArtifactCollector(
            data.artifacts,
            tenant_id=job.tenant_id,
            job_id=job.job_id,
            attempt=job.attempt,
            max_bytes=self.settings.max_artifact_bytes,
            correlation_id=job.correlation_id,
        )
        session: JobBrowser | None = None
        tracked: TrackedJob | None = None
        # A browser session's mailbox and first look at its ledger begin now, while its
        # context and page are made (browser_task.run.session_loop.begin_session).
        start = self._begin_session(job, data)
        try:
            opened = await self._opener.open(
                job, collector, data, events, meter, early, log, signals.leave_slot
            )
            if isinstance(opened, Outcome):
                return opened
            ctx = opened
            session = ctx.session
            tracked = self._egress_log.follow(log, session)
            outcome = await self._watch(job, ctx, collector, lease_lost, log, signals, start)
            return with_step_times(with_metrics(outcome, ctx.router, meter), events)
        finally:
            if start is not None:
                start.end()
            if tracked is not None:
                self._egress_log.done(tracked)
            if session is not None:
                await session.close()
                drop_recordings(session)  # not kept by now: the run was abandoned

    async def _watch(
        self,
        job: JobRecord,
        ctx: RunContext,
        collector: ArtifactCollector,
        lease_lost: asyncio.Event,
        log: JobLog,
        signals: SlotSignals,
        start: SessionStart | None,
    ) -> Outcome | None:
        """Run the workflow until it ends, the lease is lost, a cancel, an abort or the
        watchdog; each ending has its own outcome."""
        session = ctx.session
        # A job's workflow, or a browser session's commands as they come.
        steps = run_workflow(ctx) if job.request.session is None else self._session(ctx, start)
        work = asyncio.create_task(steps, name=f"job {job.job_id}")
        lost = asyncio.create_task(lease_lost.wait())
        abort = asyncio.create_task(self._abort.wait())
        view = live_view(session.page, job, self._frames, self.settings, log)
        inbox, takeover = self._session_inbox, ctx.takeover
        if inbox is not None and takeover is not None:
            inbox.on_takeover(job.tenant_id, job.job_id, takeover.told)
        cancel = asyncio.create_task(watch_cancel(self.lifecycle, job, log, view, takeover))
        try:
            spent = await within_budgets(job, ctx, {work, lost, abort, cancel})
        finally:
            lost.cancel()
            abort.cancel()
            cancel.cancel()
            await view.stop()  # before the context closes or is parked for another job
            if inbox is not None:
                inbox.off_takeover(job.job_id)
            if takeover is not None:
                await takeover.close()

        if not work.done() and not lease_lost.is_set() and self._stopping(cancel):
            # An irreversible step under way finishes (or times out) and is checkpointed
            # before the run is cut: never a silent half-state.
            assert ctx.progress is not None
            await ctx.progress.settle(work, ctx.settle_bound_s())

        if work.done():
            signals.workflow_ended()
            return await self._ended(job, ctx, collector, work, log, signals.released)

        if lease_lost.is_set():
            log.warning("lease lost; abandoning the run without writing")
            await self._kill(work, session)
            collector.cancel()
            return None

        if cancel.done() and not cancel.cancelled() and cancel.result():
            # Stopped mid-action by closing its context; what it made so far is kept.
            await self._kill(work, session)
            await keep_recordings(ctx, collector, failed=True)
            artifacts, _ = await collector.settle()
            log.info("job cancelled while running", step_index=ctx.step_index)
            return endings.cancelled(ctx, artifacts)

        if self._abort.is_set():
            await self._kill(work, session)
            artifacts, _ = await collector.settle()
            return endings.interrupted(self.lifecycle, job, ctx, artifacts)

        # The watchdog: the run outlived job_timeout_s or its max_cost_usd. Snapshot, then
        # close the context from outside the page, which ends whatever the step waited on.
        await capture_failure_artifacts(ctx)
        await self._kill(work, session)
        await keep_recordings(ctx, collector, failed=True)
        artifacts, _ = await collector.settle()
        if spent:
            return endings.spend_cap_reached(self.lifecycle, job, ctx, artifacts)
        return endings.timed_out(self.lifecycle, job, ctx, artifacts)

    async def _ended(
        self,
        job: JobRecord,
        ctx: RunContext,
        collector: ArtifactCollector,
        work: asyncio.Task[dict[str, Any]],
        log: JobLog,
        released: asyncio.Event,
    ) -> Outcome | None:
        """The workflow returned or raised: success, or a failure to retry, fail or review
        (None: the lease was lost at a checkpoint, nothing is written)."""
        crash = work.exception()
        if isinstance(crash, AttemptLost):
            log.warning("lease lost at a checkpoint; abandoning the run without writing")
            await ctx.session.close()
            collector.cancel()
            return None
        checkpoints = ctx.progress.view() if ctx.progress else None
        if crash is None:
            warm = ctx.session.warm_key is not None
            changes = None
            try:
                if not warm:
                    await ctx.session.close()  # free the browser while the uploads finish
                    released.set()
                    await keep_recordings(ctx, collector, failed=False)
                if job.request.monitor is not None:
                    changes = await self._baselines.changes(
                        job, ctx.result, ctx.tracked_screenshot, collector
                    )
                artifacts = await collector.collect()
            except JobFailure as after_run:
                await ctx.session.close()
                artifacts, _ = await collector.settle()
                return endings.refused(self.lifecycle, job, after_run, ctx.result, artifacts)
            # Only a job that succeeded, uploads included, leaves its context warm.
            ctx.session.reusable = warm and ctx.guard.stopped is None
            await ctx.session.close()
            return Outcome(
                JobStatus.SUCCEEDED,
                result=work.result(),
                artifacts=artifacts,
                checkpoints=checkpoints,
                changes=changes,
            )
        if isinstance(crash, JobFailure):
            failure = crash
        else:
            log.error(
                "internal error running the workflow",
                error=f"{type(crash).__name__}: {first_line(str(crash))}",
            )
            failure = RetryJob(
                f"internal worker error: {type(crash).__name__}", kind="internal_error"
            )
            text = step_text(ctx.step_index, ctx)
            if ctx.step_index is not None and text is not None:
                failure.at_step(ctx.step_index, text)
        await capture_failure_artifacts(ctx)
        try:
            outcome = await endings.failed(self.lifecycle, job, failure, ctx)
        except AttemptLost:
            outcome = None  # while compensating: another attempt owns the job now
        await ctx.session.close()
        if outcome is None:
            collector.cancel()
            return None
        await keep_recordings(ctx, collector, failed=True)
        artifacts, _ = await collector.settle()
        return replace(outcome, artifacts=artifacts)

    def _begin_session(self, job: JobRecord, data: TenantData) -> SessionStart | None:
        if job.request.session is None or self._session_inbox is None:
            return None
        # The tenant's own ledger (the job role's credentials) where the worker has one.
        make = data.commands or self._session_commands
        if make is None:
            return None
        # Imported by a session's first job: a worker that runs none never loads the loop.
        from browser_task.run.session_loop import begin_session

        return begin_session(self._session_inbox, make(), job.tenant_id, job.job_id)

    async def _session(self, ctx: RunContext, start: SessionStart | None) -> dict[str, Any]:
        # The tenant's own ledger (the job role's credentials) where the worker has one.
        commands = ctx.commands
        if commands is None and self._session_commands is not None:
            commands = self._session_commands()
        # Imported by a session's first job: a worker that runs none never loads the loop.
        from browser_task.run.session_loop import run_session

        return await run_session(ctx, self._session_inbox, commands, self._policies, start)

    def open_early(self, preview: Preview, log: JobLog) -> EarlyContext | None:
        """Start opening the previewed job's context while its claim is written
        (browser_task.run.early)."""
        return self._opener.open_early(preview, log)

    def _stopping(self, cancel: asyncio.Task[bool]) -> bool:
        """A cancel or a drain asked the run to stop."""
        cancelled = cancel.done() and not cancel.cancelled() and cancel.result()
        return bool(cancelled) or self._abort.is_set()

    async def _kill(self, work: asyncio.Task[Any], session: JobBrowser) -> None:
        await session.close()
        work.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(work, 5)
