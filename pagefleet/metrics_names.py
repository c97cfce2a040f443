"""Names of the metrics the worker emits (EMF) and the dashboard and alarms read.

Pure Python (no CDK import) so the runtime can share it; the worker should emit exactly
these, with Powertools Metrics (namespace ``NAMESPACE``, service ``WORKER_SERVICE``).
"""

from __future__ import annotations

NAMESPACE = "pagefleet"
# Powertools adds a ``service`` dimension to every metric; CloudWatch matches metrics on
# their full dimension set, so the dashboard needs the exact value.
WORKER_SERVICE = "browser_task"
# The DLQ consumer (functions/dead_letters) emits DEAD_LETTERED with this service dimension.
DEAD_LETTERS_SERVICE = "pagefleet-dead-letters"

JOB_DURATION = "JobDuration"  # milliseconds, per finished job; dims: service, pool
QUEUE_DELAY = "QueueDelay"  # milliseconds from enqueue to start; dims: service, pool
JOBS_FINISHED = "JobsFinished"  # count; dims: service, pool, status (final job state)
RETRIES = "Retries"  # count of retry_scheduled transitions; dims: service, pool
TIMEOUTS = "Timeouts"  # count of timed_out jobs; dims: service, pool
BROWSER_CRASHES = "BrowserCrashes"  # count; dims: service, pool
DEAD_LETTERED = "JobsDeadLettered"  # count, per job marked dead_lettered; dims: service
SLOTS_BUSY = "SlotsBusy"  # gauge of busy browser slots per task; dims: service, pool

DIM_SERVICE = "service"
DIM_POOL = "pool"
DIM_STATUS = "status"

# Final states counted by JOBS_FINISHED (the ``status`` dimension values).
FINAL_STATES = ("succeeded", "failed", "timed_out", "cancelled", "expired", "dead_lettered")
FAILED_STATES = ("failed", "timed_out", "dead_lettered")

DEAD_LETTERED = "JobsDeadLettered"  # count of jobs marked dead_lettered; dims: service
