"""A call on a thread of its own, beside the caller's next request: how a request handler
overlaps two round trips that do not need each other (a step's wake-up while its command is
recorded, a session's audit record while its job is queued).

Always waited for before the handler answers: a Lambda execution environment is frozen once
its handler returns, and work left running may never finish.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Background(threading.Thread, Generic[T]):
    """``call(*args)``, started at once; ``result()`` waits for it (and raises what it
    raised)."""

    def __init__(self, call: Callable[..., T], *args: Any) -> None:
        super().__init__(daemon=True)
        self._call, self._args = call, args
        self._out: T | None = None
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self._out = self._call(*self._args)
        except BaseException as exc:  # handed to the caller in result()
            self._error = exc

    def result(self) -> T | None:
        self.join()
        if self._error is not None:
            raise self._error
        return self._out

    def failure(self) -> BaseException | None:
        """Wait for it; what it raised (None: it returned)."""
        self.join()
        return self._error
