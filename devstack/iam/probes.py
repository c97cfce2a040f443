"""Cross-tenant probes through the worker's own path: tenant A's stores reaching for B's data.

The worker reaches a job's tenant data through ``browser_task.tenant.access.TenantAccess``:
it assumes the job role, tagged with the job's tenant, and builds the artifact, session,
usage and secret stores on those credentials. Here the stores built for tenant A are asked
for tenant B's artifacts, saved sessions, usage items and secrets, several calls each; every
one must be refused by IAM (an AccessDenied from the embedded AWS's check, not an error of
ours). Each probe has a twin asking for A's own data, which must work: a refusal of
everything would prove nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from browser_task.tenant.access import TenantAccess, TenantData
from pagefleet.adapters.s3 import artifact_key
from pagefleet.adapters.secrets import secret_id
from pagefleet.browsing.commands import CommandRecord
from pagefleet.specs.settings import WorkerSettings
from pagefleet.tenancy.usage import AttemptUsage

_REFUSED = ("AccessDenied", "not authorized")


# The probe that reads a session's commands as the worker's own (task) role: refused by that
# role's explicit deny, under the worker's principal (it carries no tenant tag).
TASK_ROLE_PROBE = "session commands: task role"


@dataclass(frozen=True)
class Probe:
    name: str
    own: bool  # asks for the caller's own tenant (must work) or another's (must be refused)
    refused: bool
    detail: str

    @property
    def as_expected(self) -> bool:
        return self.refused != self.own


def _attempt(name: str, own: bool, call: Callable[[], Any]) -> Probe:
    try:
        call()
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        return Probe(name, own, any(word in text for word in _REFUSED), text[:300])
    return Probe(name, own, False, "ok")


def seed(operator: Callable[[str], Any], settings: WorkerSettings, tenant: str) -> str:
    """Data of ``tenant`` to reach for (as the operator): an artifact, a saved session, a
    usage attempt and a secret. Returns the artifact's key."""
    key = artifact_key(tenant, "01PROBEJOB", 1, "page.png")
    s3 = operator("s3")
    s3.put_object(Bucket=settings.artifacts_bucket, Key=key, Body=b"\x89PNG probe")
    s3.put_object(
        Bucket=settings.artifacts_bucket,
        Key=f"{tenant}/sessions/login.json",
        Body=json.dumps({"cookies": [], "origins": []}).encode(),
    )
    secrets = operator("secretsmanager")
    name = secret_id(settings.stage, tenant, "password")
    with contextlib.suppress(secrets.exceptions.ResourceExistsException):
        secrets.create_secret(Name=name, SecretString="hunter2")
    return key


def _usage(tenant: str) -> AttemptUsage:
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    return AttemptUsage(
        tenant_id=tenant,
        job_id="01PROBEJOB",
        attempt=1,
        day=day,
        first_attempt=True,
        browser_seconds=1.0,
    )


def _calls(data: TenantData, settings: WorkerSettings, tenant: str, key: str) -> dict[str, Any]:
    """The calls the worker's stores make for ``tenant``'s data, by probe name."""
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    usage, sessions = data.usage, data.sessions
    assert usage is not None and sessions is not None and data.commands is not None
    commands = data.commands()
    command = CommandRecord(
        tenant_id=tenant,
        session_id="01probesession00000000000",
        command_id="probe",
        fingerprint="probe",
        deadline=0,
        created_at="",
        expires_at=int(datetime.now(UTC).timestamp()) + 3600,
    )
    return {
        "artifacts: write": lambda: data.artifacts.put(
            tenant_id=tenant,
            job_id="01PROBEJOB",
            attempt=2,
            name="probe.txt",
            data=b"probe",
            content_type="text/plain",
        ),
        "artifacts: read": lambda: data.artifacts.get(key),
        "sessions: load": lambda: asyncio.run(sessions.load(tenant, "login")),
        "sessions: save": lambda: asyncio.run(sessions.save(tenant, "probe", {"cookies": []})),
        "usage: record": lambda: usage.record(_usage(tenant)),
        "usage: days": lambda: usage.days(tenant, day, day),
        "usage: attempts": lambda: usage.attempts(tenant, "01PROBEJOB"),
        "secrets: resolve": lambda: asyncio.run(data.secrets.resolve(tenant, "password")),
        # A browser session's commands: its steps, extracted data, page snapshots.
        "session commands: record": lambda: commands.record(command),
        "session commands: read": lambda: commands.get(tenant, command.session_id, "probe"),
        "session commands: list": lambda: commands.session_commands(tenant, command.session_id),
    }


def cross_tenant_probes(
    settings: WorkerSettings,
    worker_sts: Any,
    operator: Callable[[str], Any],
    *,
    tenant: str = "probe-a",
    other: str = "probe-b",
    worker_client: Callable[[str], Any] | None = None,
) -> list[Probe]:
    """Every probe, own tenant's twin first. ``worker_sts`` is an STS client with the worker
    task role's credentials (the worker's own path assumes the job role with it);
    ``worker_client(service)`` makes other clients with them (the task role's own reach)."""
    own_key = seed(operator, settings, tenant)
    other_key = seed(operator, settings, other)
    access = TenantAccess(settings, session_ttl_s=lambda _: 3600, sts=worker_sts)
    data = access(tenant)
    probes = []
    own = _calls(data, settings, tenant, own_key)
    others = _calls(data, settings, other, other_key)
    for name in own:
        probes.append(_attempt(f"{name} (own)", True, own[name]))
        probes.append(_attempt(f"{name} ({other})", False, others[name]))
    # Beyond the stores: the listing and every-tenant index a bug might reach for.
    s3 = getattr(data.artifacts, "_s3", None)
    if s3 is not None:
        probes.append(
            _attempt(
                f"artifacts: list ({other})",
                False,
                lambda: s3.list_objects_v2(Bucket=settings.artifacts_bucket, Prefix=f"{other}/"),
            )
        )
    usage = data.usage
    assert usage is not None
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    probes.append(_attempt("usage: every tenant's day", False, lambda: usage.every_tenant(today)))
    # The worker's own role (the task role, not the job role) reaches no session command,
    # not even the tenant's it holds jobs of: they are the job role's alone.
    if worker_client is not None:
        from pagefleet.adapters.dynamodb.session_commands import DynamoCommandLedger

        own_role = DynamoCommandLedger(worker_client("dynamodb"), settings.jobs_table)
        session = "01probesession00000000000"
        probes.append(
            _attempt(
                f"{TASK_ROLE_PROBE} ({tenant})",
                False,
                lambda: own_role.session_commands(tenant, session),
            )
        )
    return probes


def summary(probes: list[Probe]) -> str:
    """The deploy check's line: ``iam: cross-tenant probes K of K denied``."""
    reaching = [p for p in probes if not p.own]
    denied = sum(1 for p in reaching if p.refused)
    return f"iam: cross-tenant probes {denied} of {len(reaching)} denied"
