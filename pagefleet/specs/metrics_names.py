"""Names of the metrics the worker emits (EMF) and the dashboard and alarms read.

Pure Python (no CDK import) so the runtime can share it; the worker should emit exactly
these, with Powertools Metrics (namespace ``NAMESPACE``, service ``WORKER_SERVICE``).
"""

from __future__ import annotations

import os

NAMESPACE = "pagefleet"
# Where the runtimes read their stage's namespace (Powertools' own variable): a deployed
# stage's functions and workers emit into ``stage_namespace(stage)``, so stages sharing an
# account share no metric (dev's busy slots never reach prod's scale-in). Unset (the local
# stack, tests): ``NAMESPACE``.
NAMESPACE_ENV = "POWERTOOLS_METRICS_NAMESPACE"


def stage_namespace(stage: str) -> str:
    """The CloudWatch namespace of one stage's metrics."""
    return f"{NAMESPACE}/{stage}"


def runtime_namespace() -> str:
    """The namespace this process emits into: its stage's, as the stack configured it."""
    return os.environ.get(NAMESPACE_ENV) or NAMESPACE


# Powertools adds a ``service`` dimension to every metric; CloudWatch matches metrics on
# their full dimension set, so the dashboard needs the exact value.
WORKER_SERVICE = "browser_task"
# Every runtime that dead-letters a job emits DEAD_LETTERED with this service dimension (the
# alarm reads it): the DLQ consumer (functions/dead_letters), and the workers' lease watch and
# the sweeper for a job whose workers kept dying (rules.LEASES_LOST_LIMIT).
DEAD_LETTERS_SERVICE = "pagefleet-dead-letters"
# The API function (functions/api) emits TENANT_REFUSALS with this service dimension.
API_SERVICE = "pagefleet-api"

JOB_DURATION = "JobDuration"  # milliseconds, per finished job; dims: service, pool
QUEUE_DELAY = "QueueDelay"  # milliseconds from enqueue to start; dims: service, pool
JOBS_FINISHED = "JobsFinished"  # count; dims: service, pool, status (final job state)
RETRIES = "Retries"  # count of retry_scheduled transitions; dims: service, pool
TIMEOUTS = "Timeouts"  # count of timed_out jobs; dims: service, pool
BROWSER_CRASHES = "BrowserCrashes"  # count; dims: service, pool
# Seconds since the oldest lease of a still-running job ended, published by the sweeper
# each minute with the service dimension SWEEPER_SERVICE.
OLDEST_EXPIRED_LEASE = "OldestExpiredLeaseAge"
SWEEPER_SERVICE = "pagefleet-sweeper"
DEAD_LETTERED = "JobsDeadLettered"  # count, per job marked dead_lettered; dims: service
# gauge of busy browser slots per task (each change, and once a minute); dims: service, pool.
# Its per-minute Average is the jobs running per task the idle scale-in reads.
SLOTS_BUSY = "SlotsBusy"
# count of refused egress (a goto's checks, the scheme watch, the egress proxies); each also
# logs one "egress refused" line with the job's keys; dims: service, pool
EGRESS_REFUSALS = "EgressRefusals"
# count of submissions refused by a tenant limit (429); dims: service
TENANT_REFUSALS = "TenantRefusals"

DIM_SERVICE = "service"
DIM_POOL = "pool"
DIM_STATUS = "status"

# Final states counted by JOBS_FINISHED (the ``status`` dimension values).
FINAL_STATES = ("succeeded", "failed", "timed_out", "cancelled", "expired", "dead_lettered")
FAILED_STATES = ("failed", "timed_out", "dead_lettered")

# The live WebSocket API (functions/live): connects accepted / refused, idle connections closed.
LIVE_CONNECTS = "LiveConnects"
LIVE_REFUSED = "LiveConnectsRefused"
LIVE_REAPED = "LiveIdleClosed"
# Webhook POSTs (functions/webhooks), one count per attempt by outcome; dims: service.
WEBHOOKS_SERVICE = "pagefleet-webhooks"
WEBHOOK_OUTCOMES = {
    "delivered": "WebhooksDelivered",
    "failed": "WebhooksFailed",  # retried with backoff, or given up (DLQ)
    "refused": "WebhooksRefused",  # the URL failed the egress checks at send time
}
# count of browser sessions found lost (their worker stopped heartbeating); dims: service,
# always SESSIONS_SERVICE: every runtime that takes a session's lease back counts it there
# (the API as a session is read, the workers' lease watch, the sweeper), and the
# lost-sessions alarm reads that one series.
SESSIONS_LOST = "BrowserSessionsLost"
SESSIONS_SERVICE = "pagefleet-sessions"
# count of what ended jobs and sessions left behind and a pass removed (a running slot of an
# ended job, a killed worker's inbox: the sweeper; a follower of an ended session: the live
# reaper); dims: service, always SESSIONS_SERVICE (one series; docs/runbooks.md "Leftovers").
# Published by every pass, 0 included: a pass that published 0 proved nothing was left.
LEFTOVERS_REMOVED = "LeftoversRemoved"
