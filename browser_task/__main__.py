"""``python -m browser_task``: run a worker until SIGTERM / SIGINT, then drain and exit 0.

The worker's composition root: ``build_worker`` is the one place its parts are chosen, from
the settings and the process's AWS clients and services (``pagefleet.runtime.RUNTIME``).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from pydantic import ValidationError

from browser_task.egress.breakers import BreakerGate
from browser_task.observe.telemetry import logger
from browser_task.run.prepare import SecretsResolver
from browser_task.slot.worker import Worker, default_worker_id
from browser_task.tenant.access import tenant_data_source
from browser_task.tenant.logins import SessionStore
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import WorkerSettings


def build_worker(
    settings: WorkerSettings,
    *,
    secrets_resolver: SecretsResolver | None = None,
    sessions: SessionStore | None = None,
    **given: Any,
) -> Worker:
    """A worker wired from its settings. ``given`` (tests, tools) replaces any of the
    ``Worker``'s parts; ``secrets_resolver`` and ``sessions`` replace those of its tenants'
    data (every tenant then uses the worker's own identity)."""
    services = RUNTIME.job_services(settings)
    limits = RUNTIME.tenancy(settings).limits  # cached: evaluate allowed, session lifetime
    worker_id = given.pop("worker_id", None) or settings.worker_id or default_worker_id()
    parts: dict[str, Any] = {
        "policies": limits,
        "breakers": BreakerGate(RUNTIME.breakers(settings), worker_id, clock=services.clock.now),
        "events": RUNTIME.event_store(settings.jobs_table),
        "schedules": RUNTIME.schedule_store(settings),
        "session_channel": RUNTIME.session_channel(settings),
    }
    if "tenant_data" not in given:
        parts["tenant_data"] = tenant_data_source(
            settings,
            artifacts=services.artifacts,
            session_ttl_s=lambda tenant: limits(tenant).session_s,
            client=RUNTIME.client,
            secrets=secrets_resolver,
            sessions=sessions,
        )
    return Worker(settings, services, worker_id=worker_id, **{**parts, **given})


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
