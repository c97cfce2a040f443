"""Audit records: who did what to whom, and when (keys, limits, redrives, deletions,
resolutions of jobs in review).

Written by the admin routes and commands and by a tenant's own deletions, listed newest
first by ``GET /v1/admin/audit`` and ``pagefleet admin audit``. A record names the actor
(an API key as ``tenant:key_id``, or the AWS identity of a CLI user), never a secret.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.jobs.models import iso, new_ulid

# Kept for 400 days (a year and a bit, for a yearly review), then expired by DynamoDB's TTL.
AUDIT_RETENTION_DAYS = 400

AuditAction = Literal[
    "key.created",
    "key.rotated",
    "key.revoked",
    "limits.changed",
    "dead_letters.redriven",
    "job.deleted",
    "job.resolved",
    "job.continued",
    "job.taken_over",
    "job.handed_back",
    "job.takeover_returned",
    "job.replayed",
    "session.deleted",
    "browser_session.opened",
    "browser_session.closed",
]


class AuditRecord(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    audit_id: str = Field(description="sortable id (ULID)")
    at: str
    actor: str = Field(description="tenant:key_id of an API key, or the AWS identity of a CLI")
    action: AuditAction
    tenant_id: str | None = Field(default=None, description="the tenant acted on")
    target: str | None = Field(default=None, description="key id, job id, session name...")
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def month(self) -> str:
        return self.at[:7]

    @property
    def expires_at(self) -> int:
        when = datetime.fromisoformat(self.at.replace("Z", "+00:00"))
        return int(when.timestamp()) + AUDIT_RETENTION_DAYS * 86_400


def audit_record(
    actor: str,
    action: AuditAction,
    *,
    tenant_id: str | None = None,
    target: str | None = None,
    details: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> AuditRecord:
    when = now or datetime.now(UTC)
    return AuditRecord(
        audit_id=new_ulid(when),  # sorts by time, like job ids
        at=iso(when),
        actor=actor,
        action=action,
        tenant_id=tenant_id,
        target=target,
        details=dict(details or {}),
    )
