"""``PagefleetClient.follow_async``: ``pagefleet.client.follow`` for asyncio programs.

The same protocol (``Follower``) and the same order of items; the WebSocket and the API are
reached with ``websockets``' asyncio client and an ``httpx.AsyncClient``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from pagefleet.api.jobs import EventPage, JobView
from pagefleet.api.live import LiveInfo
from pagefleet.client.follow import (
    PING_EVERY_S,
    RECONNECTS_MAX,
    Follower,
    FollowItem,
    SocketUnavailable,
    time_left,
)


class _Api:
    """The three reads a follower needs, async."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        timeout: float,
        error: Callable[[httpx.Response], Exception],
    ) -> None:
        self.error = error
        self.http = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            timeout=timeout,
            trust_env=False,
        )

    async def _get(self, path: str, **params: Any) -> bytes:
        response = await self.http.get(path, params=params or None)
        if response.status_code >= 400:
            raise self.error(response)
        return response.content

    async def live_url(self) -> str | None:
        return LiveInfo.model_validate_json(await self._get("/v1/live")).url

    async def events(self, job_id: str, after: int) -> EventPage:
        raw = await self._get(f"/v1/jobs/{job_id}/events", after=after, limit=1000)
        return EventPage.model_validate_json(raw)

    async def job(self, job_id: str) -> JobView:
        return JobView.model_validate_json(await self._get(f"/v1/jobs/{job_id}"))


async def follow_async(
    base_url: str,
    api_key: str,
    job_id: str,
    *,
    error: Callable[[httpx.Response], Exception],
    after: int = 0,
    timeout: float | None = None,
    live: bool = True,
    poll_s: float = 1.0,
    request_timeout: float = 30.0,
) -> AsyncIterator[FollowItem]:
    """``pagefleet.client.follow.follow`` as an async iterator; ``error`` turns an API refusal into
    the exception to raise (the client's ``ApiError``)."""
    api = _Api(base_url, api_key, request_timeout, error)
    follower = Follower(job_id, last_seq=after)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        url = await api.live_url() if live else None
        if url:
            try:
                async for item in _over_socket(api, follower, url, api_key, deadline):
                    yield item
            except SocketUnavailable:
                pass
        while not follower.done:
            for item in await _fill(api, follower):
                yield item
            for item in follower.on_job(await api.job(job_id)):
                yield item
            if not follower.done:
                await asyncio.sleep(min(poll_s, time_left(deadline, job_id)))
        for item in await _fill(api, follower):
            yield item
        assert follower.final is not None
        yield follower.final
    finally:
        await api.http.aclose()


async def _fill(api: _Api, follower: Follower) -> list[FollowItem]:
    follower.gap = False
    out: list[FollowItem] = []
    while True:
        page = await api.events(follower.job_id, follower.last_seq)
        out += follower.on_events((e.wire() for e in page.events), stored=True)
        if not page.more:
            return out


async def _over_socket(
    api: _Api, follower: Follower, url: str, api_key: str, deadline: float | None
) -> AsyncIterator[FollowItem]:
    # websockets: +0.05 s on importing the client, for callers that never follow a job.
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

    headers = {"Authorization": f"Bearer {api_key}"}
    for _ in range(RECONNECTS_MAX):
        try:
            socket = await connect(url, additional_headers=headers, open_timeout=10, proxy=None)
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise SocketUnavailable(str(exc)) from exc
        async with socket:
            await socket.send(follower.subscribe_message())
            pinged = time.monotonic()
            while not follower.done:
                left = time_left(deadline, follower.job_id)
                wait = max(0.0, min(left, PING_EVERY_S - (time.monotonic() - pinged)))
                try:
                    raw = await asyncio.wait_for(socket.recv(), wait)
                except TimeoutError:
                    await socket.send(json.dumps({"action": "ping"}))
                    pinged = time.monotonic()
                    continue
                except ConnectionClosed:
                    break
                for item in follower.on_message(json.loads(raw)):
                    yield item
                if follower.gap and not follower.done:
                    for item in await _fill(api, follower):
                        yield item
        if follower.done:
            return
    raise SocketUnavailable("the WebSocket kept closing; polling instead")
