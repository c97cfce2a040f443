"""In-memory implementations of the core's ports (``pagefleet.jobs.ports``).

They enforce the same conditions as the AWS adapters (``tests/contract`` holds both to one
suite), so lifecycle decisions are tested in milliseconds without moto or Chromium.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import partial

from devstack.fakes.job_store import FakeJobStore
from devstack.fakes.queue import FakeQueue, ReceiptHandleInvalid
from devstack.fakes.workflows import FakeWorkflowStore
from pagefleet.adapters.dynamodb import CursorCodec
from pagefleet.adapters.s3 import artifact_key
from pagefleet.jobs.hooks import NO_HOOKS, JobHooks
from pagefleet.jobs.models import TenantPolicy
from pagefleet.jobs.ports import ApiKeyRecord
from pagefleet.jobs.record import Artifact
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.submit_policy import SubmitPolicy
from pagefleet.pricing import Worker
from pagefleet.specs.resources import ROUTINE
from pagefleet.tenancy.spend import job_cost_cap


class FakeClock:
    """Epoch seconds that move only when a test moves them."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class FakeArtifactStore:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.metadata: dict[str, dict[str, str]] = {}

    def put(
        self,
        *,
        tenant_id: str,
        job_id: str,
        attempt: int,
        name: str,
        data: bytes,
        content_type: str,
        retention: str = ROUTINE,
        correlation_id: str | None = None,
    ) -> Artifact:
        key = artifact_key(tenant_id, job_id, attempt, name)
        self.objects[key] = data
        self.metadata[key] = {"correlation-id": correlation_id or ""}
        return Artifact(
            name=name,
            key=key,
            size=len(data),
            content_type=content_type,
            sha256=hashlib.sha256(data).hexdigest(),
            retention=retention,
            attempt=attempt,
        )

    def presign_get(self, key: str, ttl_seconds: int, download_name: str | None = None) -> str:
        return f"memory://artifacts/{key}?expires_in={ttl_seconds}"

    def get(self, key: str) -> bytes:
        return self.objects[key]


@dataclass
class FakeTenantStore:
    keys: dict[str, ApiKeyRecord] = field(default_factory=dict)
    policies: dict[str, TenantPolicy] = field(default_factory=dict)

    def put_key(self, record: ApiKeyRecord, key_hash: str) -> None:
        if key_hash in self.keys:
            raise ValueError("key exists")
        self.keys[key_hash] = record

    def find_key(self, key_hash: str) -> ApiKeyRecord | None:
        return self.keys.get(key_hash)

    def keys_of(self, tenant_id: str) -> list[tuple[str, ApiKeyRecord]]:
        return [(h, r) for h, r in self.keys.items() if r.tenant_id == tenant_id]

    def revoke(self, key_hash: str) -> None:
        record = self.keys[key_hash]
        self.keys[key_hash] = ApiKeyRecord(**{**record.__dict__, "revoked": True})

    def get_policy(self, tenant_id: str) -> TenantPolicy:
        return self.policies.get(tenant_id, TenantPolicy())

    def put_policy(self, tenant_id: str, policy: TenantPolicy) -> None:
        self.policies[tenant_id] = policy


class FakeSecrets:
    def __init__(self, values: dict[tuple[str, str], str] | None = None) -> None:
        self.values = dict(values or {})

    async def resolve(self, tenant_id: str, name: str) -> str | None:
        return self.values.get((tenant_id, name))


def no_lookups(host: str) -> list[str]:
    """The fakes' resolver: names under example.com are a public address (never connected
    to), localhost is loopback, nothing else resolves (no query ever leaves the machine)."""
    if host == "localhost":
        return ["127.0.0.1"]
    if host == "example.com" or host.endswith(".example.com"):
        return ["93.184.216.34"]
    raise OSError(-2, "Name or service not known (tests resolve nothing)")


# Priced on the default worker shape, as a stage that sets none.
FAKE_POLICY = SubmitPolicy(resolver=no_lookups, price_cap=partial(job_cost_cap, worker=Worker()))


def fake_services(
    clock: FakeClock | None = None,
    *,
    hooks: JobHooks = NO_HOOKS,
    policy: SubmitPolicy = FAKE_POLICY,
) -> JobServices:
    """Job services wired to in-memory fakes sharing one clock (and the lifecycle's hooks);
    ``policy``: the submission policy (the default's resolver looks nothing up)."""
    clock = clock or FakeClock()
    return JobServices.of(
        FakeJobStore(),
        FakeQueue(clock),
        FakeArtifactStore(),
        CursorCodec(),
        clock=clock,
        workflows=FakeWorkflowStore(),
        hooks=hooks,
        policy=policy,
    )


__all__ = [
    "FakeArtifactStore",
    "FakeClock",
    "FakeJobStore",
    "FakeQueue",
    "FakeSecrets",
    "FakeTenantStore",
    "ReceiptHandleInvalid",
    "fake_services",
    "no_lookups",
]
