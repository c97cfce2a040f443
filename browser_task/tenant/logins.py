"""Saved login sessions as the worker uses them: ``pagefleet.tenancy.sessions`` in threads.

Where and how sessions are kept (per tenant, encrypted, expiring) is the core's
``SessionArchive``; the worker reaches it through the job's tenant-scoped credentials
(``browser_task.tenant.access``), and saves each session for its tenant's ``session_days``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from pagefleet.tenancy.sessions import MAX_SESSION_BYTES, SessionArchive, StorageState, session_key

__all__ = [
    "MAX_SESSION_BYTES",
    "MemorySessionStore",
    "S3SessionStore",
    "SessionStore",
    "StorageState",
    "session_key",
]

# When no tenant limits are at hand (tools, tests): the platform's default.
DEFAULT_SESSION_S = 30 * 86_400


class SessionStore(Protocol):
    async def load(self, tenant_id: str, name: str) -> StorageState | None: ...

    async def save(self, tenant_id: str, name: str, state: StorageState) -> None: ...


class S3SessionStore:
    def __init__(
        self,
        client: object,
        bucket: str,
        *,
        kms_key_id: str | None = None,
        ttl_s: Callable[[str], int] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._archive = SessionArchive(client, bucket, kms_key_id=kms_key_id)  # type: ignore[arg-type]
        self._ttl_s = ttl_s or (lambda tenant_id: DEFAULT_SESSION_S)
        self._clock = clock

    async def load(self, tenant_id: str, name: str) -> StorageState | None:
        """None when never saved or expired."""
        return await asyncio.to_thread(self._archive.load, tenant_id, name, now=self._clock())

    async def save(self, tenant_id: str, name: str, state: StorageState) -> None:
        ttl = await asyncio.to_thread(self._ttl_s, tenant_id)
        await asyncio.to_thread(
            self._archive.save, tenant_id, name, state, ttl_s=ttl, now=self._clock()
        )


class MemorySessionStore:
    """In-memory store, for tests and single-process tools."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, str], StorageState] = {}

    async def load(self, tenant_id: str, name: str) -> StorageState | None:
        return self.states.get((tenant_id, name))

    async def save(self, tenant_id: str, name: str, state: StorageState) -> None:
        self.states[(tenant_id, name)] = state
