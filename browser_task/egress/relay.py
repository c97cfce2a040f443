"""The egress proxy's byte copying, once a connection is checked and dialled: both ways for a
tunnel, an upgrade or a request with a body; the answer alone for a request without one.
Every read is bounded by the idle timeout (an ``asyncio.timeout`` scope: ``wait_for`` is a
task each on Python 3.11, and a page's requests each take a few)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from browser_task.egress.http import UNREACHABLE, close_response_head, reply

CHUNK = 64 * 1024


@dataclass(frozen=True)
class Relay:
    idle_timeout_s: float

    async def pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
        *,
        rewrite_response: bool,
    ) -> None:
        """Copy both ways until the server side ends (or either side idles too long)."""
        upload = asyncio.create_task(self.copy(reader, up_writer, half_close=True))
        try:
            if rewrite_response:
                await self.copy_response(up_reader, writer)
            else:
                await self.copy(up_reader, writer, half_close=False)
        finally:
            upload.cancel()
            with contextlib.suppress(BaseException):
                await upload

    async def copy(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, half_close: bool
    ) -> None:
        try:
            while True:
                async with asyncio.timeout(self.idle_timeout_s):
                    data = await source.read(CHUNK)
                if not data:
                    break
                sink.write(data)
                await sink.drain()
        except (ConnectionError, TimeoutError):
            return
        if half_close and sink.can_write_eof():
            with contextlib.suppress(OSError):
                sink.write_eof()

    async def copy_response(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Forward the response with its connection made non-reusable, then the body as is.
        A site that answers nothing gets the browser a 502 / 504, never a closed connection
        (browser_task.egress.proxy's docstring says why)."""
        try:
            async with asyncio.timeout(self.idle_timeout_s):
                head = await source.readuntil(b"\r\n\r\n")
        except TimeoutError:
            await reply(sink, 504, "the site did not answer in time", UNREACHABLE)
            return
        except ConnectionError:
            await reply(sink, 502, "the site reset the connection without answering", UNREACHABLE)
            return
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                await reply(
                    sink, 502, "the site closed the connection without answering", UNREACHABLE
                )
                return
            # A head cut short: pass along what came (the browser reports the error).
            sink.write(exc.partial)
            await self.copy(source, sink, half_close=False)
            return
        except asyncio.LimitOverrunError:
            # A head beyond the reader's limit is still in its buffer: pass it along as is
            # (the browser applies its own limit).
            await self.copy(source, sink, half_close=False)
            return
        sink.write(close_response_head(head))
        await sink.drain()
        await self.copy(source, sink, half_close=False)
