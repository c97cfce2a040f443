"""The live view of a job's page: Chromium's screencast, run only while someone watches.

The run's signals watch (``browser_task.run.cancel_watch``) reads the job's watchers every
second and gives them to ``Screencast.update``: the first watcher starts the screencast
(``Page.startScreencast`` over a CDP session of the job's page: JPEG, sized to fit
``FRAME_MAX_WIDTH`` x ``FRAME_MAX_HEIGHT``), the last one gone stops it and detaches, so a
job nobody watches runs no screencast at all. Each frame is posted to every watcher through
the stage's ``@connections`` API (``pagefleet.live.frames.frame_messages``: messages under
API Gateway's 32 KB WebSocket frame). Chromium sends the next frame only once the last is
acknowledged, so acknowledging no sooner than ``1 / frames_per_s`` after the previous frame
holds the rate at the source: frames over the rate are never encoded. A frame too large for
its messages is skipped and the quality lowered for the next ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Protocol

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from browser_task.observe.telemetry import JobLog
from pagefleet.jobs.moves import headline
from pagefleet.jobs.record import JobRecord
from pagefleet.live.frames import FRAME_MAX_HEIGHT, FRAME_MAX_WIDTH, frame_messages
from pagefleet.live.ports import ConnectionPoster
from pagefleet.specs.settings import WorkerSettings

QUALITY_START = 60
QUALITY_MIN = 20
QUALITY_STEP = 15


class LiveView(Protocol):
    async def update(self, watchers: frozenset[str]) -> None: ...

    async def stop(self) -> None: ...


class NoLiveView:
    """A worker without a live endpoint: watchers get nothing (and nothing runs)."""

    async def update(self, watchers: frozenset[str]) -> None:
        return None

    async def stop(self) -> None:
        return None


def live_view(
    page: Page,
    job: JobRecord,
    poster: ConnectionPoster | None,
    settings: WorkerSettings,
    log: JobLog,
) -> LiveView:
    if poster is None:
        return NoLiveView()
    return Screencast(page, job.job_id, poster, frames_per_s=settings.live_frames_per_s, log=log)


class Screencast:
    def __init__(
        self, page: Page, job_id: str, poster: ConnectionPoster, *, frames_per_s: int, log: JobLog
    ) -> None:
        self._page = page
        self._job_id = job_id
        self._poster = poster
        self._interval_s = 1.0 / frames_per_s
        self._log = log
        self._cdp: CDPSession | None = None
        self._watchers: frozenset[str] = frozenset()
        self._gone: set[str] = set()  # said gone (410) by API Gateway: sent nothing more
        self._quality = QUALITY_START
        self._seq = 0
        self._last_at = 0.0
        self._tasks: set[asyncio.Task[None]] = set()
        # Chromium keeps more than one frame in flight: one frame at a time is handled.
        self._one_at_a_time = asyncio.Lock()
        self.frames_sent = 0

    @property
    def running(self) -> bool:
        return self._cdp is not None

    async def update(self, watchers: frozenset[str]) -> None:
        """The job's watchers now: start the screencast for the first, stop it after the
        last."""
        self._gone &= watchers  # a connection marked again is tried again
        self._watchers = watchers
        live = watchers - self._gone
        if live and self._cdp is None:
            await self._start()
        elif not live and self._cdp is not None:
            await self.stop()

    async def _start(self) -> None:
        if self._page.is_closed():
            return
        cdp = await self._page.context.new_cdp_session(self._page)
        cdp.on("Page.screencastFrame", self._on_frame)
        self._cdp = cdp
        await cdp.send("Page.startScreencast", self._params())
        self._log.info("live view started", watchers=len(self._watchers))

    def _params(self) -> dict[str, Any]:
        return {
            "format": "jpeg",
            "quality": self._quality,
            "maxWidth": FRAME_MAX_WIDTH,
            "maxHeight": FRAME_MAX_HEIGHT,
        }

    async def stop(self) -> None:
        cdp, self._cdp = self._cdp, None
        self._watchers = frozenset()
        for task in list(self._tasks):
            task.cancel()
        if cdp is None:
            return
        with contextlib.suppress(PlaywrightError):
            await cdp.send("Page.stopScreencast")
            await cdp.detach()
        self._log.info("live view stopped", frames=self.frames_sent)

    def _on_frame(self, params: dict[str, Any]) -> None:
        task = asyncio.create_task(self._frame(params))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _frame(self, params: dict[str, Any]) -> None:
        async with self._one_at_a_time:
            cdp = self._cdp
            if cdp is None:
                return
            try:
                await self._send(params)
            except Exception as exc:  # a lost frame; the next one may pass
                self._log.warning("live view frame not sent", error=headline(exc))
            wait = self._last_at + self._interval_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._last_at = time.monotonic()
            with contextlib.suppress(PlaywrightError):
                await cdp.send("Page.screencastFrameAck", {"sessionId": params["sessionId"]})

    async def _send(self, params: dict[str, Any]) -> None:
        meta = params.get("metadata") or {}
        self._seq += 1
        messages = frame_messages(
            self._job_id,
            self._seq,
            str(params["data"]),
            width=int(meta.get("deviceWidth") or 0),
            height=int(meta.get("deviceHeight") or 0),
        )
        if not messages:
            await self._lower_quality()
            return
        for connection_id in self._watchers - self._gone:
            for message in messages:
                if not await asyncio.to_thread(self._poster.post, connection_id, message):
                    self._gone.add(connection_id)
                    break
        self.frames_sent += 1
        if not self._watchers - self._gone:
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.stop()))

    async def _lower_quality(self) -> None:
        """Too large for its messages: the next frames at a lower quality."""
        cdp = self._cdp
        if cdp is None or self._quality <= QUALITY_MIN:
            return
        self._quality = max(QUALITY_MIN, self._quality - QUALITY_STEP)
        await cdp.send("Page.stopScreencast")
        await cdp.send("Page.startScreencast", self._params())
