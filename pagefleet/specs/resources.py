"""The data resources of pagefleet, defined once.

Both the CDK constructs (infra/) and the local stack (devstack/) build their tables,
queues and bucket from these specs, and tests/infra checks that the synthesized template and
the local resources agree, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class KeyAttr:
    name: str
    type: str = "S"  # DynamoDB scalar type: S or N


@dataclass(frozen=True)
class IndexSpec:
    name: str
    partition_key: KeyAttr
    sort_key: KeyAttr | None = None


@dataclass(frozen=True)
class TableSpec:
    logical_id: str
    local_name: str
    partition_key: KeyAttr
    sort_key: KeyAttr | None = None
    indexes: tuple[IndexSpec, ...] = ()
    ttl_attribute: str | None = None
    stream: bool = False

    def attribute_definitions(self) -> list[dict[str, str]]:
        seen: dict[str, str] = {}
        keys = [self.partition_key, self.sort_key]
        for index in self.indexes:
            keys += [index.partition_key, index.sort_key]
        for key in keys:
            if key is not None:
                seen.setdefault(key.name, key.type)
        return [{"AttributeName": n, "AttributeType": t} for n, t in sorted(seen.items())]


Priority = Literal["high", "normal", "low"]
# SQS has no priorities: each pool has a queue per priority, and workers take from the high
# queue first without starving the others (docs/decisions.md, "Priority").
PRIORITIES: tuple[Priority, ...] = ("high", "normal", "low")


def queue_key(pool: str, priority: str = "normal") -> str:
    """The name a queue goes by in settings (``PAGEFLEET_QUEUE_URLS``) and messages."""
    return pool if priority == "normal" else f"{pool}-{priority}"


@dataclass(frozen=True)
class QueueSpec:
    pool: str
    local_name: str
    visibility_timeout_s: int
    max_receive_count: int
    retention_s: int = 4 * 24 * 3600
    dlq_retention_s: int = 14 * 24 * 3600
    receive_wait_s: int = 20
    priority: Priority = "normal"

    @property
    def key(self) -> str:
        return queue_key(self.pool, self.priority)

    @property
    def dlq_local_name(self) -> str:
        return f"{self.local_name}-dlq"


@dataclass(frozen=True)
class LifecycleRule:
    retention_class: str
    expire_days: int


@dataclass(frozen=True)
class BucketSpec:
    logical_id: str
    local_name: str
    lifecycle: tuple[LifecycleRule, ...] = field(default_factory=tuple)
    abort_incomplete_upload_days: int = 1
    # Artifacts carry this object tag; the lifecycle rules filter on it.
    retention_tag: str = "retention"


# Job records, idempotency keys and attempt history, all keyed by tenant first.
JOBS_TABLE = TableSpec(
    logical_id="JobsTable",
    local_name="pagefleet-jobs",
    partition_key=KeyAttr("pk"),
    sort_key=KeyAttr("sk"),
    indexes=(
        # Listing filtered by status, newest first: pk "<tenant>#<status>", sk = job id (ULID).
        IndexSpec("by_status", KeyAttr("status_pk"), KeyAttr("sk")),
        # Sparse index of jobs whose message is not known to be in the queue; the sweeper reads it.
        IndexSpec("unqueued", KeyAttr("unqueued_pk"), KeyAttr("created_at")),
        # Sparse index of jobs an operator or the sweeper must look at across tenants, by what
        # they wait for: "deadline#N" (queued with a latest start), "lease#N" (running: lease
        # expiry), "retry#N" (retry due time), "dead" (dead-lettered). sk is a sortable time.
        IndexSpec("ops", KeyAttr("ops_pk"), KeyAttr("ops_sk")),
    ),
    ttl_attribute="expires_at",
    stream=True,
)

# Tenants and their hashed API keys, each tenant's limits and counters, and audit records
# (which expire).
TENANTS_TABLE = TableSpec(
    logical_id="TenantsTable",
    local_name="pagefleet-tenants",
    partition_key=KeyAttr("pk"),
    sort_key=KeyAttr("sk"),
    indexes=(IndexSpec("by_tenant", KeyAttr("tenant_id"), KeyAttr("sk")),),
    ttl_attribute="expires_at",
)

# Usage per attempt and per tenant and day (and workflow), tenant first; the sparse by_day
# index lists every tenant's day for operators.
USAGE_TABLE = TableSpec(
    logical_id="UsageTable",
    local_name="pagefleet-usage",
    partition_key=KeyAttr("pk"),
    sort_key=KeyAttr("sk"),
    indexes=(IndexSpec("by_day", KeyAttr("day_pk"), KeyAttr("day_sk")),),
    ttl_attribute="expires_at",
)

# Live WebSocket connections, the rooms they follow and connect tickets (all short-lived).
CONNECTIONS_TABLE = TableSpec(
    logical_id="ConnectionsTable",
    local_name="pagefleet-connections",
    partition_key=KeyAttr("pk"),
    sort_key=KeyAttr("sk"),
    indexes=(
        # Sparse: connections that follow nothing, since when (the idle reaper reads it).
        IndexSpec("idle", KeyAttr("idle_pk"), KeyAttr("idle_since", "N")),
    ),
    ttl_attribute="expires_at",
)

TABLES: tuple[TableSpec, ...] = (JOBS_TABLE, TENANTS_TABLE, USAGE_TABLE, CONNECTIONS_TABLE)

# The jobs stream's records that invoke its reader (job_changes), as Lambda event filter
# patterns (any one matches): every write to a job record (sk "JOB#<id>"), and the run
# events a worker inserts (sk "EVT#...", which live delivery sends). Idempotency keys,
# dependency edges, deliveries, breakers, schedules and counters never invoke it. The stack's
# event source mapping and the local stack's stream poller both filter with these.
JOBS_STREAM_FILTERS: tuple[dict[str, Any], ...] = (
    {"dynamodb": {"Keys": {"sk": {"S": [{"prefix": "JOB#"}]}}}},
    {"eventName": ["INSERT"], "dynamodb": {"Keys": {"sk": {"S": [{"prefix": "EVT#"}]}}}},
)

# The lease is the visibility timeout; the worker's heartbeat extends it while a job runs.
LEASE_SECONDS = 60
MAX_RECEIVE_COUNT = 5

# Every deployment has these pools unless it declares otherwise (infra/config.py, the
# deploy file's "pools"); a deployment's own pools are its settings' (CoreSettings.pools).
DEFAULT_POOLS: tuple[str, ...] = ("standard", "heavy")


def pool_queues(pool: str) -> tuple[QueueSpec, ...]:
    """A pool's queues, highest priority first: the same for every pool, whatever its name."""
    return tuple(
        QueueSpec(
            pool,
            f"pagefleet-jobs-{queue_key(pool, priority)}",
            LEASE_SECONDS,
            MAX_RECEIVE_COUNT,
            priority=priority,
        )
        for priority in PRIORITIES
    )


def queues_of(pools: Iterable[str]) -> tuple[QueueSpec, ...]:
    """Every queue of ``pools``, pool by pool."""
    return tuple(spec for pool in pools for spec in pool_queues(pool))


DEFAULT_POOL = "standard"

# Completion webhooks: each delivery is a message; a failed POST is retried with backoff by
# hiding the message (visibility) for hours; after WEBHOOK_ATTEMPTS receives it goes to the DLQ.
WEBHOOK_ATTEMPTS = 12
WEBHOOK_QUEUE = QueueSpec(
    "webhooks",  # not a worker pool: the webhook sender's own queue
    "pagefleet-webhooks",
    # Six times the sender function's timeout (infra/constructs/notifications.py), AWS's rule.
    visibility_timeout_s=240,
    max_receive_count=WEBHOOK_ATTEMPTS,
    retention_s=2 * 24 * 3600,
)


@dataclass(frozen=True)
class SchedulerSpec:
    """EventBridge Scheduler's parts: the schedule group and the target's dead-letter queue.

    The Scheduler invokes the scheduler function asynchronously: a fire the function fails
    is Lambda's to try again (``function_retries`` more times), then to record in the same
    dead-letter queue, the function's on-failure destination."""

    local_group: str = "pagefleet-local"
    dlq_local_name: str = "pagefleet-scheduler-dlq"
    dlq_retention_s: int = 14 * 24 * 3600
    function_retries: int = 2


SCHEDULER = SchedulerSpec()

# Set for every Lambda function, deployed and local. No pydantic plugin is used (pydantic
# loads them from the "pydantic" entry point group; tests/unit/test_function_env.py checks
# none is installed): without this, the first validator built at a cold start scans every
# installed distribution's entry points for one.
FUNCTION_ENV = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}

# The REST API's stage, named for the version: every URL is https://<api>/v1/<route>, on
# API Gateway (the stage), a custom domain (its base path mapping) and the local gateway.
API_STAGE = "v1"

ROUTINE = "routine"
DEBUG = "debug"
# Saved login sessions: each expires when its tenant's session_days say (checked on use);
# the bucket rule removes what nobody saved again within the longest allowed session life.
SESSION = "session"
SESSION_MAX_DAYS = 365

ARTIFACTS_BUCKET = BucketSpec(
    logical_id="ArtifactsBucket",
    local_name="pagefleet-artifacts",
    lifecycle=(
        LifecycleRule(ROUTINE, 7),
        LifecycleRule(DEBUG, 30),
        LifecycleRule(SESSION, SESSION_MAX_DAYS),
    ),
)


# The worker reaches a job's tenant data as the job role, with this session tag set to the
# job's tenant; the role's policies allow only what carries the tag's value.
TENANT_SESSION_TAG = "tenant"
JOB_ROLE_LOCAL_NAME = "pagefleet-job"


# A browser session's commands (its steps, extracted data, page snapshots) sit in the jobs
# table under this partition per tenant, apart from the tenant's job items: the job role
# reaches only its tag's partition, the worker task roles none (infra/constructs).
# Audit records' partitions in the tenants table (AUDIT#<yyyy-mm>): workers may add a record
# there (a takeover returned after its idle time) and write nothing else of the table's.
AUDIT_PK_PREFIX = "AUDIT#"
# A person holding a job's page (pagefleet.jobs.takeover) who does nothing on it for this
# long gives it back: ApiSettings.takeover_idle_s, between these bounds.
TAKEOVER_IDLE_S = 60
TAKEOVER_IDLE_MIN_S = 10
TAKEOVER_IDLE_MAX_S = 600
SESSION_LEDGER_PK_PREFIX = "SCMD#"


# Browser sessions' command inboxes: one SQS queue per worker process, made when it starts
# and deleted when it stops (docs/decisions.md, 2026-12-05), named under this prefix so that
# IAM can reach exactly these. A session's worker is its job's lease owner, and its inbox's
# name is made from that owner: nothing else needs recording at claim.
def inbox_queue_prefix(stage: str) -> str:
    return f"pagefleet-{stage}-inbox-"


def claim_owner(worker_id: str, token: str) -> str:
    """A claim's lease owner: its worker, and a token of its own (another slot of the same
    worker never mistakes the job for its own)."""
    return f"{worker_id}/{token}"


def owner_worker(owner: str) -> str:
    """The worker of a lease owner (``claim_owner``'s; an owner without a token is one)."""
    worker, slash, _token = owner.rpartition("/")
    return worker if slash else owner


def inbox_name(stage: str, worker_id: str) -> str:
    """The inbox of worker ``worker_id`` (SQS: at most 80 of [A-Za-z0-9_-])."""
    import hashlib

    return inbox_queue_prefix(stage) + hashlib.sha256(worker_id.encode()).hexdigest()[:32]
