"""Every minute (EventBridge): re-enqueue lost jobs, take back dead leases (the backstop of
the workers' own lease watch), expire deadlines, and remove what ended jobs and sessions
left behind: killed workers' command inboxes, the running slots of ended jobs (counted as
``LeftoversRemoved``, 0 included: a pass that removed nothing proved nothing was left)."""

from __future__ import annotations

import dataclasses
from typing import Any

from functions.cold_start import collector_paused

with collector_paused():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.logging import correlation_paths
    from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

    from functions.lambda_context import lambda_entry
    from functions.xray import function_tracer
    from pagefleet.browsing.leftovers import sweep_inboxes
    from pagefleet.jobs.service import JobServices
    from pagefleet.jobs.sweeper import sweep
    from pagefleet.runtime import RUNTIME
    from pagefleet.schedules import service as schedules
    from pagefleet.specs import metrics_names
    from pagefleet.specs.resources import inbox_queue_prefix
    from pagefleet.specs.settings import CoreSettings
    from pagefleet.tenancy.gate import give_back_ended

SERVICE = metrics_names.SWEEPER_SERVICE
logger = Logger(service=SERVICE)
metrics = EphemeralMetrics(namespace=metrics_names.runtime_namespace(), service=SERVICE)
# Jobs dead-lettered here are counted where the dead-letter alarm reads every runtime's count.
dead_letters = EphemeralMetrics(
    namespace=metrics_names.runtime_namespace(), service=metrics_names.DEAD_LETTERS_SERVICE
)
# Sessions lost here (their lease taken back), and leftovers removed, are counted where the
# lost-sessions alarm and the leftovers' runbook read every runtime's count.
lost_sessions = EphemeralMetrics(
    namespace=metrics_names.runtime_namespace(), service=metrics_names.SESSIONS_SERVICE
)
tracer = function_tracer(SERVICE)


def resync_schedules() -> int:
    """Mirror again the schedules whose EventBridge Scheduler mirror failed to update."""
    settings = RUNTIME.settings(CoreSettings)
    if settings.schedule_group is None:
        return 0
    store, mirror = RUNTIME.schedules(settings)
    return schedules.resync(store, mirror)


def services() -> JobServices:
    return RUNTIME.job_services(RUNTIME.settings(CoreSettings))


def leftovers(svc: JobServices, now: float) -> dict[str, Any]:
    """What ended jobs and sessions left behind, found and removed: killed workers' command
    inboxes, and running slots their job no longer holds (the final move's give-back lost
    to a crash). Followers of ended sessions are the live reaper's (functions/live)."""
    settings = RUNTIME.settings(CoreSettings)
    swept = sweep_inboxes(
        RUNTIME.session_inbox(settings),
        RUNTIME.inbox_registry(settings),
        inbox_queue_prefix(settings.stage),
        now=now,
    )
    slots, slots_removed = give_back_ended(RUNTIME.tenancy(settings).gate.counters, svc.store)
    return {
        "inboxes": swept.inboxes,
        "inboxes_removed": swept.removed,
        "inboxes_removed_names": list(swept.removed_names),
        "slots": slots,
        "slots_removed": slots_removed,
    }


@lambda_entry(SERVICE)
@logger.inject_lambda_context(correlation_id_path=correlation_paths.EVENT_BRIDGE)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    svc = services()
    report: dict[str, Any] = dataclasses.asdict(sweep(svc))
    report["schedules_resynced"] = resync_schedules()
    report["leftovers"] = found = leftovers(svc, svc.clock.now())
    logger.info("sweep", extra=report)
    removed = found["inboxes_removed"] + found["slots_removed"]
    if removed:
        logger.warning("leftovers removed", extra=found)
    # Every minute, 0 included (a sweeper that stops has its own alarm).
    metrics.add_metric(
        name=metrics_names.OLDEST_EXPIRED_LEASE,
        unit=MetricUnit.Seconds,
        value=report["oldest_expired_lease_s"],
    )
    if report["leases_dead_lettered"]:
        dead_letters.add_metric(
            name=metrics_names.DEAD_LETTERED,
            unit=MetricUnit.Count,
            value=report["leases_dead_lettered"],
        )
        dead_letters.flush_metrics()
    if report["sessions_lost"]:
        logger.warning("browser sessions lost", extra={"count": report["sessions_lost"]})
        lost_sessions.add_metric(
            name=metrics_names.SESSIONS_LOST, unit=MetricUnit.Count, value=report["sessions_lost"]
        )
    lost_sessions.add_metric(
        name=metrics_names.LEFTOVERS_REMOVED, unit=MetricUnit.Count, value=removed
    )
    lost_sessions.flush_metrics()
    return report
