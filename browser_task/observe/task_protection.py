"""ECS task scale-in protection: a worker with jobs in flight must not be scaled in.

The ECS agent inside every Fargate task serves ``$ECS_AGENT_URI/task-protection/v1/state``.
The worker turns protection on when its first slot gets busy and off when the last one is
idle, so a scale-in picks idle tasks only. Outside ECS (no ECS_AGENT_URI) it does nothing.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx

from browser_task.observe.telemetry import logger

# Renewed while busy; expiry is the backstop if the worker dies without releasing it.
PROTECTION_MINUTES = 60


class TaskProtection:
    def __init__(
        self, agent_uri: str | None = None, *, expires_minutes: int = PROTECTION_MINUTES
    ) -> None:
        self._uri = agent_uri if agent_uri is not None else os.environ.get("ECS_AGENT_URI")
        self._minutes = expires_minutes
        self._busy = 0
        self._protected = False
        self._lock = asyncio.Lock()
        self.calls = 0

    @property
    def enabled(self) -> bool:
        return bool(self._uri)

    @property
    def protected(self) -> bool:
        return self._protected

    async def job_started(self) -> None:
        self._busy += 1
        await self._sync()

    async def job_ended(self) -> None:
        self._busy = max(0, self._busy - 1)
        await self._sync()

    async def _sync(self) -> None:
        if not self._uri:
            return
        async with self._lock:  # one call at a time, always toward the latest wish
            want = self._busy > 0
            if want == self._protected:
                return
            body: dict[str, Any] = {"ProtectionEnabled": want}
            if want:
                body["ExpiresInMinutes"] = self._minutes
            try:
                async with httpx.AsyncClient(timeout=5, trust_env=False) as http:
                    resp = await http.put(f"{self._uri}/task-protection/v1/state", json=body)
                self.calls += 1
                data = resp.json() if resp.content else {}
                if resp.status_code >= 400 or "failure" in data or "error" in data:
                    logger.warning(
                        "task protection refused", extra={"status": resp.status_code, "want": want}
                    )
                    return
            except (httpx.HTTPError, ValueError) as exc:
                # Best effort: without protection a scale-in may stop a busy task, whose jobs
                # then come back through their leases.
                logger.warning("task protection call failed", extra={"error": str(exc)[:200]})
                return
            self._protected = want
