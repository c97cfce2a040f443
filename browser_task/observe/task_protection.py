"""ECS task scale-in protection: a worker with jobs in flight must not be scaled in.

The ECS agent inside every Fargate task serves ``$ECS_AGENT_URI/task-protection/v1/state``.
The worker turns protection on when its first slot gets busy and off when the last one is
idle, so a scale-in picks idle tasks only. Outside ECS (no ECS_AGENT_URI) it does nothing.

Protection lasts ``ExpiresInMinutes`` and then lapses, busy or not ("After this time period
lapses, the protectionEnabled parameter is set to false"; each PUT sets the period again:
https://docs.aws.amazon.com/AmazonECS/latest/userguide/task-scale-in-protection-endpoint.html).
A worker whose slots stay busy for longer than that (a steady load keeps one job or another
running) renews it while half the period is left, and again each minute while a renewal is
refused; the period is the backstop for a worker that hangs with protection on.

One small PUT to the agent on the task's own link-local address: the standard library's
HTTP client does it in a thread, so the worker does not import httpx (and the command line
parts its package loads: click, rich, pygments), ~110 modules it holds for nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from browser_task.observe.telemetry import logger

# The agent's answer and errors in one shape: (status, parsed body).
_Reply = tuple[int, dict[str, Any]]
# No proxy from the environment: the agent is the task's own, never behind one.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# How long each PUT protects the task; renewed while busy (ECS takes 1 to 2,880 minutes).
PROTECTION_MINUTES = 60
MIN_MINUTES, MAX_MINUTES = 1, 2880
# Renewed when this share of the period is left; a refused renewal is tried again this often.
RENEW_WHEN_LEFT = 0.5
RETRY_S = 60.0


class TaskProtection:
    def __init__(
        self,
        agent_uri: str | None = None,
        *,
        expires_minutes: int = PROTECTION_MINUTES,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if not MIN_MINUTES <= expires_minutes <= MAX_MINUTES:
            raise ValueError(f"ECS protects a task {MIN_MINUTES} to {MAX_MINUTES} minutes")
        self._uri = agent_uri if agent_uri is not None else os.environ.get("ECS_AGENT_URI")
        self._minutes = expires_minutes
        self._sleep = sleep
        self._busy = 0
        self._protected = False
        self._lock = asyncio.Lock()
        self._renewer: asyncio.Task[None] | None = None
        self.calls = 0
        self.renewals = 0

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
            if not await self._put_state(want):
                return
            self._protected = want
            if want:
                self._renewer = asyncio.create_task(self._renew(), name="task-protection")
            else:
                self._stop_renewing()

    async def _put_state(self, want: bool) -> bool:
        """Ask the agent for protection on (for the period) or off; whether it was done."""
        body: dict[str, Any] = {"ProtectionEnabled": want}
        if want:
            body["ExpiresInMinutes"] = self._minutes
        try:
            status, data = await asyncio.to_thread(self._put, body)
            self.calls += 1
        except (OSError, ValueError) as exc:
            # Best effort: without protection a scale-in may stop a busy task, whose jobs
            # then come back through their leases.
            logger.warning("task protection call failed", extra={"error": str(exc)[:200]})
            return False
        if status >= 400 or "failure" in data or "error" in data:
            logger.warning(
                "task protection refused",
                extra={"status": status, "want": want, "answer": json.dumps(data)[:300]},
            )
            return False
        return True

    async def _renew(self) -> None:
        """While protected and busy: the period set again before it lapses."""
        period_s = self._minutes * 60.0
        wait_s = period_s * (1 - RENEW_WHEN_LEFT)
        while True:
            await self._sleep(wait_s)
            async with self._lock:
                if not (self._protected and self._busy > 0):
                    return
                renewed = await self._put_state(True)
            if renewed:
                self.renewals += 1
            wait_s = period_s * (1 - RENEW_WHEN_LEFT) if renewed else RETRY_S

    def _stop_renewing(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
        self._renewer = None

    async def close(self) -> None:
        """At the worker's exit: no renewal left running."""
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer

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
