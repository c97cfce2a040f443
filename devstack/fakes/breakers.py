"""In-memory circuit breakers with the DynamoDB adapter's rules (``tests/contract`` holds
them to the same suite): a tenant's own breaker and the origin's shared one, windows,
cooldowns, one probe, trusted tenants."""

from __future__ import annotations

import builtins
import threading
from dataclasses import dataclass, field

from pagefleet.targets.breakers import (
    SHARED,
    TENANT,
    Admission,
    BreakerPolicy,
    BreakerState,
    DomainStatus,
    split_origin,
    trusted,
    worst,
)


@dataclass
class _Item:
    state: BreakerState = BreakerState.CLOSED
    failures: int = 0
    total: int = 0
    window_start: int = 0
    opened_at: int | None = None
    probe_owner: str | None = None
    probe_started: int = 0
    failing_tenants: set[str] = field(default_factory=set)
    last_ok_at: int | None = None


class FakeBreakers:
    def __init__(self, policy: BreakerPolicy | None = None) -> None:
        self.policy = policy or BreakerPolicy()
        self._lock = threading.RLock()
        self._items: dict[tuple[str, str | None], _Item] = {}

    # --- reading ----------------------------------------------------------------------------
    def get(self, origin: str, tenant: str | None = None) -> DomainStatus:
        with self._lock:
            return self._status(origin, tenant, self._items.get((origin, tenant)) or _Item())

    def _status(self, origin: str, tenant: str | None, item: _Item) -> DomainStatus:
        reopens = None
        if item.opened_at is not None and item.state is not BreakerState.CLOSED:
            reopens = item.opened_at + self.policy.cooldown_s
        return DomainStatus(
            domain=origin,
            state=item.state,
            failures=item.failures,
            total=item.total,
            window_start=item.window_start,
            opened_at=item.opened_at,
            reopens_at=reopens,
            probe_started=item.probe_started,
            failing_tenants=len(item.failing_tenants),
            tenant=tenant,
            last_ok_at=item.last_ok_at,
        )

    def list(self) -> list[DomainStatus]:
        with self._lock:
            return [self._status(o, t, i) for (o, t), i in self._sorted() if t is None]

    def on_host(self, host: str, tenant: str | None = None) -> builtins.list[DomainStatus]:
        with self._lock:
            return [
                self._status(o, t, i)
                for (o, t), i in self._sorted()
                if t == tenant and split_origin(o)[1] == host
            ]

    def _sorted(self) -> builtins.list[tuple[tuple[str, str | None], _Item]]:
        # In the adapter's sort key order: host, then scheme:port as text.
        def where(origin: str) -> str:
            scheme, host, port = split_origin(origin)
            return f"{host}#{scheme}:{port}"

        return sorted(self._items.items(), key=lambda kv: where(kv[0][0]))

    # --- the worker's side ------------------------------------------------------------------
    def admit(self, origin: str, *, tenant: str, now: int, worker: str) -> Admission:
        with self._lock:
            own = self._items.get((origin, tenant)) or _Item()
            shared = self._items.get((origin, None)) or _Item()
            refused = self._waiting(own, now, TENANT)
            if refused is not None:
                return refused
            refused = self._waiting(shared, now, SHARED)
            if refused is not None:
                if trusted(self._status(origin, tenant, own), self.policy, now):
                    return Admission(True, state=shared.state)
                self._items.setdefault((origin, tenant), own)  # the tenant may now ask
                return refused
            probes = set()
            for scope, item in ((TENANT, own), (SHARED, shared)):
                if item.state is not BreakerState.CLOSED:
                    item.state, item.probe_owner, item.probe_started = (
                        BreakerState.HALF_OPEN,
                        worker,
                        now,
                    )
                    probes.add(scope)
            return Admission(True, probe=bool(probes), state=shared.state, probes=frozenset(probes))

    def _waiting(self, item: _Item, now: int, scope: str) -> Admission | None:
        if item.state is BreakerState.CLOSED:
            return None
        assert item.opened_at is not None
        if item.state is BreakerState.OPEN:
            wait = item.opened_at + self.policy.cooldown_s - now
            return (
                Admission(False, retry_after_s=wait, state=item.state, scope=scope)
                if wait > 0
                else None
            )
        if now - item.probe_started < self.policy.probe_timeout_s:
            cooldown = self.policy.cooldown_s
            return Admission(False, retry_after_s=cooldown, state=item.state, scope=scope)
        return None

    def record(
        self,
        origin: str,
        *,
        tenant: str,
        ok: bool,
        now: int,
        probes: frozenset[str] = frozenset(),
        worker: str = "",
    ) -> BreakerState:
        if not probes:
            return self.record_counts(
                origin, tenant=tenant, total=1, failures=0 if ok else 1, now=now
            )
        with self._lock:
            states = []
            for scope in sorted(probes):
                item = self._items.setdefault(
                    (origin, None if scope == SHARED else tenant), _Item()
                )
                if not ok:
                    if item.state is BreakerState.HALF_OPEN:
                        item.state, item.opened_at, item.probe_owner = BreakerState.OPEN, now, None
                elif item.state is BreakerState.HALF_OPEN and item.probe_owner == worker:
                    item.state, item.opened_at, item.probe_owner = BreakerState.CLOSED, None, None
                    item.window_start, item.total, item.failures = now, 0, 0
                    item.failing_tenants = set()
                    if scope == TENANT:
                        item.last_ok_at = now
                states.append(item.state)
            return worst(states)

    def keep_probe(
        self, origin: str, *, tenant: str, probes: frozenset[str], now: int, worker: str
    ) -> None:
        with self._lock:
            for scope in probes:
                item = self._items.get((origin, None if scope == SHARED else tenant))
                if item and item.state is BreakerState.HALF_OPEN and item.probe_owner == worker:
                    item.probe_started = now

    def record_counts(
        self, origin: str, *, tenant: str, total: int, failures: int, now: int
    ) -> BreakerState:
        with self._lock:
            own = self._count(origin, tenant, total, failures, now, failing=None)
            shared = self._count(origin, None, total, failures, now, failing=tenant)
            return worst([own, shared])

    def _count(
        self,
        origin: str,
        tenant: str | None,
        total: int,
        failures: int,
        now: int,
        *,
        failing: str | None,
    ) -> BreakerState:
        item = self._items.setdefault((origin, tenant), _Item())
        if item.window_start <= now - self.policy.window_s:
            item.window_start, item.total, item.failures = now, 0, 0
            item.failing_tenants = set()
        item.total += total
        item.failures += failures
        if failing is not None and failures:
            item.failing_tenants.add(failing)
        if tenant is not None and total > failures:
            item.last_ok_at = now
        enough_tenants = tenant is not None or len(item.failing_tenants) >= self.policy.min_tenants
        if (
            item.state is BreakerState.CLOSED
            and enough_tenants
            and item.total >= self.policy.min_requests
            and item.failures / item.total >= self.policy.failure_rate
        ):
            item.state, item.opened_at = BreakerState.OPEN, now
        return item.state
