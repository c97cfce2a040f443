"""Worker liveness for the container health check.

The worker's slots touch a file each time round their poll loop, and every few seconds
while they run a job (a job may take up to an hour; the loop does not come round then).
``python -m browser_task.observe.health`` is the task definition's health check: it fails when the
file is missing or older than ``MAX_AGE_S``, so ECS replaces a task whose worker stopped
polling (a blocked event loop, dead slots) instead of leaving it up, taking no jobs.

Standard library only: the check runs every 30 s in the container and must start fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

FILE_NAME = "pagefleet-worker.alive"
# A slot comes round at least every poll_wait_seconds (<= 20 s) plus a receive error's 1 s
# pause; a busy slot beats every TOUCH_EVERY_S. Three missed rounds are a stopped loop.
MAX_AGE_S = 60.0
TOUCH_EVERY_S = 5.0


def liveness_file() -> Path:
    """In the temp directory: on Fargate that is the task's writable /tmp volume."""
    return Path(tempfile.gettempdir()) / FILE_NAME


class Liveness:
    def __init__(
        self,
        path: Path | None = None,
        *,
        every_s: float = TOUCH_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path or liveness_file()
        self._every_s = every_s
        self._clock = clock
        self._last: float | None = None

    def beat(self) -> None:
        """Touch the file (at most every ``every_s``); never fails the caller."""
        now = self._clock()
        if self._last is not None and now - self._last < self._every_s:
            return
        self._last = now
        with contextlib.suppress(OSError):
            self.path.touch()

    @contextlib.asynccontextmanager
    async def busy(self) -> AsyncIterator[None]:
        """Keep beating while a job runs (the event loop must still be turning)."""

        async def keep_beating() -> None:
            while True:
                self.beat()
                await asyncio.sleep(self._every_s)

        task = asyncio.create_task(keep_beating())
        try:
            yield
        finally:
            task.cancel()


def check(path: Path, max_age_s: float = MAX_AGE_S, now: float | None = None) -> str | None:
    """None when the worker is alive, else why not."""
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except FileNotFoundError:
        return f"{path} does not exist: the worker has not polled yet"
    if age > max_age_s:
        return f"{path} is {age:.0f} s old (limit {max_age_s:.0f} s): the poll loop stopped"
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    max_age = float(args[0]) if args else MAX_AGE_S
    problem = check(liveness_file(), max_age)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
