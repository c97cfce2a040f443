"""Everything a run does before its first step: the plan, the egress checks, the browser
context and the ``RunContext`` the steps run in.

A failure here (a refused plan, a refused proxy, a context that will not open) is the
attempt's outcome; nothing has run in the page yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from browser_task.browser.page_view import NavigationWatch
from browser_task.browser.pool import BrowserPool
from browser_task.browser.tracing import TraceRecorder, trace_plan
from browser_task.browser.warm import allows_warm, warm_key
from browser_task.egress.guard import EgressGuard, Resolver
from browser_task.egress.http import Refused
from browser_task.egress.log import EgressLog
from browser_task.egress.proxy import Decision, EgressProxy, UpstreamProxy
from browser_task.errors import JobFailure, opening_failure, proxy_refused
from browser_task.observe.reporting import watch_page
from browser_task.observe.request_events import on_request
from browser_task.observe.run_events import RunEvents
from browser_task.observe.telemetry import JobLog
from browser_task.observe.usage import AttemptMeter
from browser_task.run import endings
from browser_task.run.checkpointing import Progress
from browser_task.run.context import RunContext
from browser_task.run.dialogs import DialogWatch
from browser_task.run.early import EarlyContext, open_early, with_trace
from browser_task.run.executor import scheme_guard
from browser_task.run.monitoring import stored_result
from browser_task.run.prepare import TenantPolicies, prepare_run
from browser_task.run.routing import RequestRouter, with_routes
from browser_task.run.takeover import PageTakeover
from browser_task.tenant.access import TenantData, TenantDataSource
from browser_task.tenant.artifacts import ArtifactCollector
from pagefleet.jobs.lifecycle import Lifecycle, Outcome
from pagefleet.jobs.preview import Preview
from pagefleet.jobs.record import JobRecord
from pagefleet.specs.settings import WorkerSettings
from pagefleet.tenancy.ports import AuditLog


class RunOpener:
    """Opens a claimed job's run: one per worker, shared by its slots."""

    def __init__(
        self,
        settings: WorkerSettings,
        lifecycle: Lifecycle,
        browsers: BrowserPool,
        *,
        tenant_data: TenantDataSource,
        policies: TenantPolicies | None,
        resolver: Resolver,
        egress_log: EgressLog,
        audit: AuditLog | None = None,
    ) -> None:
        self.settings = settings
        self.lifecycle = lifecycle
        self.browsers = browsers
        self._tenant_data = tenant_data
        self._policies = policies
        self._resolver = resolver
        self._egress_log = egress_log
        # Where a takeover returned after its idle time is recorded (None: not audited).
        self._audit = audit

    async def open(
        self,
        job: JobRecord,
        collector: ArtifactCollector,
        data: TenantData,
        events: RunEvents | None,
        meter: AttemptMeter | None,
        early: EarlyContext | None,
        log: JobLog,
        leave_slot: Callable[[], bool] = lambda: False,
    ) -> RunContext | Outcome:
        """Everything before the first step; a failure here is the job's outcome.
        ``leave_slot``: the slot's (``SlotSignals.leave_slot``), for an await_human step."""
        try:
            # Everything a run needs, settled before any browser work (run.plan).
            plan = await prepare_run(
                job,
                secrets=data.secrets,
                sessions=data.sessions,
                policies=self._policies,
                parents=self.parent_result,
                artifacts=data.artifacts,
            )
        except JobFailure as refused:
            if early is not None:
                await early.discard()
            return endings.refused(self.lifecycle, job, refused)
        options = plan.options
        if early is not None and not early.fits(options, storage_state=plan.storage_state):
            await early.discard()
            early = None
        guard = early.guard if early is not None else self.guard(log)
        router = (
            early.router
            if early is not None
            else RequestRouter(guard, options.block, plan.replay_har)
        )
        job_egress: EgressProxy | None = None
        if options.proxy is not None:
            try:
                job_egress = await self.browsers.job_egress(
                    UpstreamProxy.of(options.proxy), on_refusal=self._egress_log.decisions(log)
                )
            except Refused as refused:
                report = self._egress_log.sink(log)
                report(options.proxy.host, options.proxy.port, refused.kind, refused.reason)
                return endings.refused(self.lifecycle, job, proxy_refused(refused))
        request = job.request
        trace: TraceRecorder | None = None
        try:
            if early is not None:
                session, trace = await early.opening, early.trace
            else:
                warm = allows_warm(request, options, storage_state=plan.storage_state)
                # The trace starts with the context (a warm one is traced as the workflow
                # starts: executor.start_tracing).
                wanted = trace_plan(request.options.trace, plan.tries, secrets=bool(plan.masker))
                if not warm and wanted is not None:
                    trace = TraceRecorder(None, wanted)
                session = await self.browsers.new_session(
                    options,
                    storage_state=plan.storage_state,
                    setup=with_trace(with_routes(scheme_guard(guard), router), trace),
                    egress=job_egress,
                    warm_key=warm_key(job.tenant_id, self.settings.pool, options) if warm else None,
                )
        except Exception as launch_error:
            return endings.refused(self.lifecycle, job, opening_failure(str(launch_error)))
        if meter is not None:
            on_request(session.context, session.listeners, meter.on_request)  # dropped when parked
        ctx = RunContext(
            plan=plan,
            session=session,
            guard=guard,
            artifacts=collector,
            sessions=data.sessions,
            secrets=data.secrets if request.session is not None else None,
            commands=(data.commands() if request.session is not None and data.commands else None),
            trace=trace if trace is not None and trace.started else None,
            egress_refusals=(
                (lambda: job_egress.refusals)
                if job_egress is not None
                else self._refusals_since(time.time())
            ),
            events=events,
            progress=Progress(self.lifecycle, job, events, lease_s=self.settings.lease_seconds),
            router=router,
            url_budget=router.budget,
            leave_slot=leave_slot,
            # Its listeners are dropped when a warm context is parked.
            navigation=NavigationWatch.listening(session.page, session.listeners),
        )
        # Its listener is dropped when a warm context is parked.
        ctx.dialogs = DialogWatch.listening(
            options, events, ctx.mask, session.page, session.listeners
        )
        ctx.takeover = PageTakeover(
            session.page,
            job,
            self.lifecycle.store,
            data.inputs,
            events=events,
            audit=self._audit,
            log=log,
        )
        if events is not None:
            events.mask_with(ctx.mask)  # the job's secret values never reach an event
            watch_page(
                events,
                session.page,
                capture_console=options.capture_console,
                listeners=session.listeners,  # removed when a warm context is parked
            )
        return ctx

    def guard(self, log: JobLog) -> EgressGuard:
        """A job's own scheme and address checks (its refusals go to ``log``)."""
        return EgressGuard(
            allow_loopback=self.settings.allow_loopback,
            resolver=self._resolver,
            on_refusal=self._egress_log.sink(log),
        )

    def open_early(self, preview: Preview, log: JobLog) -> EarlyContext | None:
        """Start opening the previewed job's context while its claim is written
        (browser_task.run.early)."""
        return open_early(self.browsers, preview, self.guard(log))

    def parent_result(self, tenant_id: str, job_id: str) -> dict[str, Any] | None:
        """A parent's result: inline in its record, or in its ``data.json`` when too big
        (read through the tenant's own credentials, as every artifact of its jobs)."""
        parent = self.lifecycle.store.get(tenant_id, job_id, consistent=False)
        return stored_result(parent, self._tenant_data(tenant_id).artifacts)

    def _refusals_since(self, since: float) -> Callable[[], list[Decision]]:
        # The proxy serves both slots; a refusal after this job started is the likely cause.
        def refusals() -> list[Decision]:
            return [d for d in self.browsers.egress.refusals if d.at >= since]

        return refusals
