"""A handler module's imports without the cyclic garbage collector.

A cold start creates a few hundred thousand objects (classes, functions, pydantic schemas)
and keeps nearly all of them, so the collections their allocations trigger during the
imports scan them for nothing: ~0.08 s of CPU of the API's cold import on CPython 3.11
(bench/latency.py, docs/performance.md). After the imports the survivors are frozen
(``gc.freeze``): no later collection scans them either, on any request.
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
