"""``python -m browser_task``: run a worker until SIGTERM / SIGINT, then drain and exit 0.

The worker's composition root: ``build_worker`` is the one place its parts are chosen, from
the settings and the process's AWS clients and services (``pagefleet.runtime.RUNTIME``).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from pydantic import ValidationError

from browser_task.browser.pool import BrowserPool
from browser_task.egress.breakers import BreakerGate
from browser_task.egress.guard import Resolver, system_resolver
from browser_task.egress.log import EgressLog
from browser_task.egress.proxy import Connector, open_tcp
from browser_task.observe.health import Liveness
from browser_task.observe.task_protection import TaskProtection
from browser_task.observe.telemetry import JobLog, WorkerMetrics, logger
from browser_task.run.inbox import WorkerInbox
from browser_task.run.opening import RunOpener
from browser_task.run.prepare import SecretsResolver, TenantPolicies
from browser_task.run.runner import JobRunner
from browser_task.slot.ahead import LaterHooks
from browser_task.slot.completion import Completion
from browser_task.slot.deletes import GatheredDeletes
from browser_task.slot.leases import LeaseWatch
from browser_task.slot.parts import WorkerParts, default_worker_id
from browser_task.slot.receiver import Receiver
from browser_task.slot.worker import Worker
from browser_task.tenant.access import TenantDataSource, tenant_data_source
from browser_task.tenant.logins import SessionStore
from pagefleet.browsing.inbox import InboxRegistry, SessionInbox
from pagefleet.jobs.lifecycle import Lifecycle
from pagefleet.jobs.service import JobServices
from pagefleet.live.ports import EventStore
from pagefleet.runtime import RUNTIME
from pagefleet.specs import metrics_names as metric
from pagefleet.specs.resources import inbox_name
from pagefleet.specs.settings import WorkerSettings
from pagefleet.tenancy.ports import AuditLog

if TYPE_CHECKING:
    from pagefleet.browsing.commands import CommandLedger
    from pagefleet.schedules.service import ScheduleStore

T = TypeVar("T")


def build_worker(
    settings: WorkerSettings,
    *,
    services: JobServices | None = None,
    worker_id: str | None = None,
    secrets_resolver: SecretsResolver | None = None,
    sessions: SessionStore | None = None,
    tenant_data: TenantDataSource | None = None,
    policies: TenantPolicies | None = None,
    breakers: BreakerGate | None = None,
    events: EventStore | None = None,
    schedules: ScheduleStore | None = None,
    session_inbox: SessionInbox | None = None,
    inbox_registry: InboxRegistry | None = None,
    session_commands: CommandLedger | None = None,
    audit: AuditLog | None = None,
    resolver: Resolver | None = None,
    connect: Connector | None = None,
    protection: TaskProtection | None = None,
    metrics: WorkerMetrics | None = None,
    liveness: Liveness | None = None,
) -> Worker:
    """A worker wired from its settings and the process's AWS clients and services; any
    part given (tests, tools) is used instead of the one built here. ``secrets_resolver``
    and ``sessions`` replace those of its tenants' data (every tenant then uses the
    worker's own identity); ``connect`` is how the egress proxies dial out."""
    services = services or RUNTIME.job_services(settings)
    worker_id = worker_id or settings.worker_id or default_worker_id()
    clock = services.clock.now
    if policies is None:
        policies = RUNTIME.tenancy(settings).limits  # cached: evaluate allowed, session lifetime
    if tenant_data is None:
        limits = RUNTIME.tenancy(settings).limits
        tenant_data = tenant_data_source(
            settings,
            artifacts=services.artifacts,
            session_ttl_s=lambda tenant: limits(tenant).session_s,
            client=RUNTIME.client,
            secrets=secrets_resolver,
            sessions=sessions,
        )
    breakers = breakers or BreakerGate(RUNTIME.breakers(settings), worker_id, clock=clock)
    events = events or RUNTIME.event_store(settings.jobs_table)
    metrics = metrics or WorkerMetrics(settings.pool)
    protection = protection or TaskProtection()
    resolver = resolver or system_resolver()
    # The hooks' after-claim work and the claimed message's delete run off the slots' path
    # (browser_task.slot.ahead): this worker's own lifecycle over the services' store and
    # queue. The services' lifecycle, which the process shares, stays as it was built.
    later = ThreadPoolExecutor(max_workers=1, thread_name_prefix="after-claim")
    shared = services.lifecycle
    # Its messages' deletes go ten a request (browser_task.slot.deletes), its claims' hooks
    # a tenant's together (browser_task.slot.ahead).
    deletes = GatheredDeletes(shared.queue)
    hooks = LaterHooks(shared.hooks)
    lifecycle = Lifecycle(shared.store, deletes, shared.clock, hooks=hooks, later=later.submit)
    egress_log = EgressLog(metrics)
    browsers = BrowserPool(
        settings,
        on_crash=lambda: metrics.count(metric.BROWSER_CRASHES),
        resolver=resolver,
        connect=connect or open_tcp,
        on_refusal=egress_log.proxy_refused,
    )
    log = JobLog(worker=worker_id, pool=settings.pool)
    # This worker's command inbox: a session's job names its worker (the lease owner), and
    # the API wakes the session through that worker's inbox (pagefleet.browsing.inbox).
    inbox = WorkerInbox(
        session_inbox or RUNTIME.session_inbox(settings),
        inbox_registry or RUNTIME.inbox_registry(settings),
        inbox_name(settings.stage, worker_id),
        clock=clock,
    )
    stop_flag, abort = threading.Event(), asyncio.Event()
    parts = WorkerParts(
        worker_id=worker_id,
        lifecycle=lifecycle,
        later=later,
        deletes=deletes,
        hooks=hooks,
        browsers=browsers,
        runner=JobRunner(
            settings,
            lifecycle,
            RunOpener(
                settings,
                lifecycle,
                browsers,
                tenant_data=tenant_data,
                policies=policies,
                resolver=resolver,
                egress_log=egress_log,
                audit=audit or RUNTIME.audit_log(settings.tenants_table),
            ),
            tenant_data=tenant_data,
            policies=policies,
            abort=abort,
            egress_log=egress_log,
            # Made by a monitor's / a session's first job: most workers never load them.
            schedules=_on_first_use(schedules, partial(RUNTIME.schedule_store, settings)),
            session_inbox=inbox,
            session_commands=_on_first_use(
                session_commands, partial(RUNTIME.session_commands, settings)
            ),
            frames=RUNTIME.connection_poster(settings.live_endpoint),
        ),
        completion=Completion(
            lifecycle,
            worker_id,
            breaker=breakers,
            tenant_data=tenant_data,
            protection=protection,
            metrics=metrics,
            clock=clock,
        ),
        receiver=Receiver(
            services.queue,
            settings.pool,
            visibility=settings.lease_seconds,
            wait_seconds=settings.poll_wait_seconds,
            stopping=stop_flag.is_set,
        ),
        lease_watch=LeaseWatch(
            services,
            pool=settings.pool,
            lease_s=settings.lease_seconds,
            log=log,
            on_dead_lettered=metrics.dead_lettered,
            on_sessions_lost=metrics.sessions_lost,
        ),
        breakers=breakers,
        events=events,
        protection=protection,
        metrics=metrics,
        liveness=liveness or Liveness(),
        log=log,
        clock=clock,
        stop_flag=stop_flag,
        abort=abort,
        inbox=inbox,
    )
    return Worker(settings, parts)


def _on_first_use(given: T | None, build: Callable[[], T]) -> Callable[[], T]:
    """``given`` when a caller gave it; else ``build`` (RUNTIME keeps what it built once)."""
    if given is None:
        return build
    return lambda: given


def main() -> int:
    try:
        settings = WorkerSettings()
    except ValidationError as exc:
        problems = "\n".join(
            f"  PAGEFLEET_{'_'.join(str(p) for p in err['loc']).upper()}: {err['msg']}"
            for err in exc.errors()
        )
        print(f"browser_task: invalid settings\n{problems}", file=sys.stderr)
        return 2
    worker = build_worker(settings)
    try:
        asyncio.run(_serve(worker))
    except Exception:
        logger.exception("worker failed")
        return 1
    return 0


async def _serve(worker: Worker) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.request_stop)
    await worker.run()


if __name__ == "__main__":
    sys.exit(main())
