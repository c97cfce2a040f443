"""Typed settings, one model per runtime, validated at start.

Environment variable names are derived from the field names with the ``PAGEFLEET_`` prefix
and defined nowhere else; ``env_names()`` lists them so the infra tests can check that the
stack sets exactly these.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pagefleet.breaker import BreakerPolicy
from pagefleet.resources import DEFAULT_POOL, LEASE_SECONDS

ENV_PREFIX = "PAGEFLEET_"


class _Base(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)


class CoreSettings(_Base):
    """What every runtime needs to find the data resources."""

    jobs_table: str
    tenants_table: str
    artifacts_bucket: str
    # pool name -> queue URL, as JSON in the environment.
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

    def queue_url(self, pool: str) -> str:
        return self.queue_urls[pool]


class ApiSettings(CoreSettings):
    presign_ttl_seconds: int = Field(default=300, ge=30, le=3600)
    max_request_bytes: int = Field(default=256 * 1024, ge=1024)
    default_pool: str = DEFAULT_POOL
    page_size_max: int = Field(default=100, ge=1, le=1000)


class AuthorizerSettings(_Base):
    tenants_table: str


class WorkerSettings(CoreSettings):
    pool: str = DEFAULT_POOL
    concurrency: int = Field(default=2, ge=1, le=64)
    lease_seconds: int = Field(default=LEASE_SECONDS, ge=10, le=43200)
    heartbeat_seconds: int = Field(default=15, ge=1)
    poll_wait_seconds: int = Field(default=10, ge=0, le=20)
    # Local development only: lets the browser reach 127.0.0.0/8 and ::1 (the demo site).
    allow_loopback: bool = False
    chromium_path: str | None = None
    # None: sandbox on unless the worker runs as root (Chromium cannot sandbox as root).
    chromium_sandbox: bool | None = None
    headless: bool = True
    max_jobs_per_browser: int = Field(default=200, ge=1)
    # Recycle the browser when the RSS of its process tree (summed per process, so shared
    # pages count more than once) passes this; running jobs finish on the old one.
    max_browser_rss_mb: int = Field(default=1500, ge=100)
    max_artifact_bytes: int = Field(default=25 * 1024 * 1024, ge=1024)
    worker_id: str | None = None
    # On SIGTERM, how long running jobs may take to finish before they are handed back to
    # the queue; keep it below the ECS stop timeout minus poll_wait_seconds.
    drain_seconds: int = Field(default=20, ge=0, le=110)


def env_names(settings_cls: type[BaseSettings]) -> set[str]:
    """The environment variable names a settings model reads."""
    prefix = settings_cls.model_config.get("env_prefix", "")
    return {f"{prefix}{name}".upper() for name in settings_cls.model_fields}


def to_env(settings: BaseSettings) -> dict[str, str]:
    """Render settings back into environment variables (for child processes, CDK)."""
    import json

    prefix = type(settings).model_config.get("env_prefix", "")
    out: dict[str, str] = {}
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        text: Any = json.dumps(value) if isinstance(value, dict | list) else value
        if isinstance(value, bool):
            text = "true" if value else "false"
        out[f"{prefix}{name}".upper()] = str(text)
    return out
