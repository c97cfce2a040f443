"""ECS task scale-in protection: a worker with jobs in flight must not be scaled in.

The ECS agent inside every Fargate task serves ``$ECS_AGENT_URI/task-protection/v1/state``.
The worker turns protection on when its first slot gets busy and off when the last one is
idle, so a scale-in picks idle tasks only. Outside ECS (no ECS_AGENT_URI) it does nothing.

One small PUT to the agent on the task's own link-local address: the standard library's
HTTP client does it in a thread, so the worker does not import httpx (and the command line
parts its package loads: click, rich, pygments), ~110 modules it holds for nothing else.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from typing import Any

from browser_task.observe.telemetry import logger

# The agent's answer and errors in one shape: (status, parsed body).
_Reply = tuple[int, dict[str, Any]]
# No proxy from the environment: the agent is the task's own, never behind one.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

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
                status, data = await asyncio.to_thread(self._put, body)
                self.calls += 1
                if status >= 400 or "failure" in data or "error" in data:
                    logger.warning(
                        "task protection refused", extra={"status": status, "want": want}
                    )
                    return
            except (OSError, ValueError) as exc:
                # Best effort: without protection a scale-in may stop a busy task, whose jobs
                # then come back through their leases.
                logger.warning("task protection call failed", extra={"error": str(exc)[:200]})
                return
            self._protected = want

    def _put(self, body: dict[str, Any]) -> _Reply:
        if not str(self._uri).startswith(("http://", "https://")):
            raise ValueError(f"ECS_AGENT_URI is not an http URL: {self._uri!r}")
        request = urllib.request.Request(  # noqa: S310 (the scheme is checked above)
            f"{self._uri}/task-protection/v1/state",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="PUT",
        )
        try:
            with _OPENER.open(request, timeout=5) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as refused:  # a 4xx/5xx answer, read like any other
            status, raw = refused.code, refused.read()
        data = json.loads(raw) if raw else {}
        return status, data if isinstance(data, dict) else {}
