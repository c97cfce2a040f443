"""A handler module's imports without the cyclic garbage collector.

A cold start creates a few hundred thousand objects (classes, functions, pydantic schemas)
and keeps nearly all of them, so the collections the allocations trigger during the imports
scan them for nothing (~20 ms of the API's cold import, docs/performance.md). After them the
survivors are frozen (``gc.freeze``): no later collection scans them either, on any request.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()  # what the imports made lives as long as the process: never scan it
        if enabled:
            gc.enable()
