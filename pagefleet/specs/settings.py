"""Typed settings, one model per runtime, validated at start.

Environment variable names are derived from the field names with the ``PAGEFLEET_`` prefix
and defined nowhere else; ``env_names()`` lists them so the infra tests can check that the
stack sets exactly these.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pagefleet.pricing import Worker as WorkerShape
from pagefleet.specs.pools import Isolation, PoolOffer, PoolProxy
from pagefleet.specs.resources import (
    DEFAULT_POOL,
    LEASE_SECONDS,
    TAKEOVER_IDLE_MAX_S,
    TAKEOVER_IDLE_MIN_S,
    TAKEOVER_IDLE_S,
    pool_queues,
)
from pagefleet.specs.tenant_defaults import LimitDefaults
from pagefleet.targets.breakers import BreakerPolicy

ENV_PREFIX = "PAGEFLEET_"


class _Base(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)


class CoreSettings(_Base):
    """What every runtime needs to find the data resources."""

    jobs_table: str
    tenants_table: str
    artifacts_bucket: str
    # Prepended to a queue_urls value that is a queue's name (no scheme): a Lambda function's
    # environment holds 4 KB in all (infra/function_env.py), so the stack gives functions the
    # account's queue URL prefix once and each queue by name (a task gets whole URLs).
    # Declared before queue_urls: its validator reads it.
    queue_url_prefix: str | None = None
    # queue key (standard, standard-high...) -> queue URL (or name), as JSON in the environment.
    queue_urls: dict[str, str]
    stage: str = "dev"
    # Per-domain circuit breaker thresholds, as JSON: {"window_s": 60, "failure_rate": 0.5, ...}
    breaker: BreakerPolicy = Field(default_factory=BreakerPolicy)
    # EventBridge Scheduler: the stage's schedule group, the scheduler function each schedule
    # targets, the role the Scheduler invokes it with, and the target's dead-letter queue.
    schedule_group: str | None = None
    scheduler_target_arn: str | None = None
    scheduler_role_arn: str | None = None
    scheduler_dlq_arn: str | None = None
    # Chaos testing only: the share of AWS calls this runtime fails on purpose (0 = never).
    aws_fault_rate: float = Field(default=0.0, ge=0.0, le=0.5)
    # Usage per attempt and day (None: usage is not recorded nor reported).
    usage_table: str | None = None
    # The limits of a tenant an admin set none for, as JSON (the stage's defaults).
    tenant_defaults: LimitDefaults = Field(default_factory=LimitDefaults)
    # How long a tenant's limits are kept before they are read again (a change an admin makes
    # holds everywhere within this).
    limits_cache_seconds: float = Field(default=10.0, ge=0, le=300)
    # What each worker pool offers, as JSON (pagefleet.specs.pools.PoolOffer): where a job's
    # ``requires`` routes it. Empty: the deployment publishes none, and ``requires`` is refused.
    pools: tuple[PoolOffer, ...] = ()
    # The Fargate task a slot lives in, to price browser-seconds (the standard pool's): usage
    # costs, and the browser time a job's or a session's max_cost_usd buys (jobs.spend).
    pricing_worker: WorkerShape = Field(default_factory=WorkerShape)
    # Local development only: webhooks may target loopback (the tests' receivers) and the
    # browser may reach 127.0.0.0/8 and ::1 (the demo site). Every runtime that makes or runs
    # jobs reads it, so each judges a job's addresses alike (``jobs.submit_policy``).
    allow_loopback: bool = False

    @field_validator("queue_urls")
    @classmethod
    def _whole_urls(cls, urls: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        prefix = info.data.get("queue_url_prefix")
        if not prefix:
            return urls
        return {key: url if "://" in url else f"{prefix}{url}" for key, url in urls.items()}

    def queue_url(self, pool: str) -> str:
        return self.queue_urls[pool]

    @property
    def pool_names(self) -> tuple[str, ...]:
        """The deployment's worker pools: those its queues serve (a pool's normal-priority
        queue goes by the pool's name, which holds no "-")."""
        return tuple(key for key in self.queue_urls if "-" not in key)

    @model_validator(mode="after")
    def _offers_have_queues(self) -> CoreSettings:
        missing = sorted(
            spec.key
            for offer in self.pools
            for spec in pool_queues(offer.name)
            if spec.key not in self.queue_urls
        )
        if missing:
            raise ValueError(f"pools offered without their queues in queue_urls: {missing}")
        return self


class ApiSettings(CoreSettings):
    presign_ttl_seconds: int = Field(default=300, ge=30, le=3600)
    max_request_bytes: int = Field(default=256 * 1024, ge=1024)
    default_pool: str = DEFAULT_POOL
    page_size_max: int = Field(default=100, ge=1, le=1000)
    # Live runs (None: no WebSocket API in this deployment; the ticket route says so).
    connections_table: str | None = None
    live_url: str | None = None  # wss://.../<stage>, what clients connect to
    # A person holding a job's page gives it back after this long without input
    # (pagefleet.jobs.takeover; docs/api.md, "Take over a page").
    takeover_idle_s: int = Field(
        default=TAKEOVER_IDLE_S, ge=TAKEOVER_IDLE_MIN_S, le=TAKEOVER_IDLE_MAX_S
    )


class AuthorizerSettings(_Base):
    tenants_table: str


class WorkerSettings(CoreSettings):
    pool: str = DEFAULT_POOL
    concurrency: int = Field(default=2, ge=1, le=64)
    lease_seconds: int = Field(default=LEASE_SECONDS, ge=10, le=43200)
    heartbeat_seconds: int = Field(default=15, ge=1)
    poll_wait_seconds: int = Field(default=10, ge=0, le=20)
    chromium_path: str | None = None
    # None: sandbox on unless the worker runs as root (Chromium cannot sandbox as root).
    chromium_sandbox: bool | None = None
    headless: bool = True
    max_jobs_per_browser: int = Field(default=200, ge=1)
    # Recycle the browser when the RSS of its process tree (summed per process, so shared
    # pages count more than once) passes this; running jobs finish on the old one.
    max_browser_rss_mb: int = Field(default=1500, ge=100)
    # While no job runs, make one context and page ahead for the next job with default
    # context options (its renderer starts before the claim: browser_task.browser.spare).
    spare_context: bool = True
    max_artifact_bytes: int = Field(default=25 * 1024 * 1024, ge=1024)
    worker_id: str | None = None
    # On SIGTERM, how long running jobs may take to finish before they are handed back to
    # the queue; keep it below the ECS stop timeout minus poll_wait_seconds.
    drain_seconds: int = Field(default=20, ge=0, le=110)
    # The role a job's tenant data (artifacts, sessions, secrets, usage) is reached through,
    # assumed per tenant with the session tag tenant=<id>; None: the worker's own identity.
    job_role_arn: str | None = None
    # Run events: written at most once per events_flush_s per job, at most events_max_per_job
    # (then one `truncated` event); kept with the job (or events_retention_s after creation).
    events_flush_s: float = Field(default=1.0, ge=0.05, le=10.0)
    events_max_per_job: int = Field(default=2000, ge=10, le=100_000)
    events_retention_s: int = Field(default=30 * 24 * 3600, ge=3600)
    # The WebSocket stage's management endpoint: a watched job's frames are posted there
    # (pagefleet.live.frames); None: this worker sends no live view.
    live_endpoint: str | None = None
    live_frames_per_s: int = Field(default=2, ge=1, le=5)
    # Jobs waiting for a person (await_human) whose slot went to other jobs while their
    # context stays open, at most this many a worker (memory: docs/decisions.md,
    # 2026-12-05); past it a waiting job keeps its slot. 0, or an isolation "task" pool:
    # every waiting job keeps its slot.
    max_waiting_contexts: int = Field(default=2, ge=0, le=32)
    # The pool's isolation: "task" runs one job at a time (concurrency 1) and gives each job
    # a browser of its own, launched for it and closed after it (pagefleet.specs.pools).
    isolation: Isolation = "shared"
    # The pool's egress proxy, as JSON (PoolProxy: ECS puts the pool's Secrets Manager
    # secret here when the task starts): the worker's egress filter checks every target,
    # then tunnels through it. None: straight out (NAT or a public IP).
    egress_proxy: PoolProxy | None = None

    @model_validator(mode="after")
    def _one_job_when_isolated(self) -> WorkerSettings:
        if self.isolation == "task" and self.concurrency != 1:
            raise ValueError("isolation task runs one job at a time: concurrency must be 1")
        return self

    @property
    def jobs_per_browser(self) -> int:
        """Jobs a browser runs before a fresh one is launched (1: a browser per job)."""
        return 1 if self.isolation == "task" else self.max_jobs_per_browser


# The worker's process environment beyond its settings, wherever it runs: the image, the
# task definition, the local stack. glibc reads it at start: its ~12 threads share two
# malloc arenas instead of one each (up to 8 x cores on 64-bit; docs/decisions.md).
WORKER_PROCESS_ENV = {"MALLOC_ARENA_MAX": "2"}


class ChangesSettings(CoreSettings):
    """The jobs stream's reader: live delivery and completion notifications (when set)."""

    connections_table: str | None = None
    # The WebSocket stage's management endpoint (https://<api>.execute-api.<region>...).
    live_endpoint: str | None = None
    # Messages per second to one connection; the excess is coalesced into one message.
    live_messages_per_s: int = Field(default=10, ge=2, le=100)
    webhook_queue_url: str | None = None
    # EventBridge bus for "Job Finished" events ("default"); None: none are sent.
    event_bus_name: str | None = None
    # The web console's base URL (https://<domain>/console/): a notification that asks for a
    # person links to the job's live view with it; None: no console, no link.
    console_url: str | None = None


class LiveSettings(_Base):
    """The WebSocket API's routes ($connect, subscribe, ...) and the idle reaper."""

    jobs_table: str
    tenants_table: str
    connections_table: str
    live_endpoint: str
    stage: str = "dev"
    # A connection that follows nothing for this long is closed by the server.
    idle_unsubscribed_s: int = Field(default=300, ge=1, le=7200)
    max_rooms: int = Field(default=100, ge=1, le=1000)
    # API Gateway closes every connection after 2 h; records outlive it by a few minutes.
    connection_ttl_s: int = Field(default=2 * 3600 + 300, ge=60)


class WebhookSettings(_Base):
    """The webhook sender: signed POSTs with retries (the queue's visibility is the backoff)."""

    jobs_table: str
    queue_url: str  # the webhook queue (a failed POST hides its message for the backoff)
    stage: str = "dev"
    allow_loopback: bool = False
    timeout_s: float = Field(default=5.0, gt=0, le=20)
    backoff_base_s: float = Field(default=10.0, gt=0)
    backoff_cap_s: float = Field(default=3600.0, gt=0, le=43200)


def env_names(settings_cls: type[BaseSettings]) -> set[str]:
    """The environment variable names a settings model reads."""
    prefix = settings_cls.model_config.get("env_prefix", "")
    return {f"{prefix}{name}".upper() for name in settings_cls.model_fields}


def env_name(settings_cls: type[BaseSettings], field: str) -> str:
    """The environment variable one field of ``settings_cls`` is read from."""
    if field not in settings_cls.model_fields:
        raise ValueError(f"{settings_cls.__name__} has no setting {field!r}")
    return f"{settings_cls.model_config.get('env_prefix', '')}{field}".upper()


def to_env(settings: BaseSettings) -> dict[str, str]:
    """Render settings back into environment variables (for child processes, CDK)."""
    prefix = type(settings).model_config.get("env_prefix", "")
    out: dict[str, str] = {}
    for name, value in settings.model_dump(mode="json").items():
        if value is None:
            continue
        text: Any = json.dumps(value) if isinstance(value, dict | list | tuple) else value
        if isinstance(value, bool):
            text = "true" if value else "false"
        out[f"{prefix}{name}".upper()] = str(text)
    return out
