"""The spare context's own bookkeeping, without a browser: a making that failed does not
stand in the way of the next one."""

from __future__ import annotations

import asyncio
from typing import Any

from browser_task.browser.spare import SpareContext


class Page:
    def on(self, _event: str, _handler: Any) -> None:
        pass

    def is_closed(self) -> bool:
        return False


def test_a_making_that_failed_does_not_keep_the_next_one_from_being_made() -> None:
    async def scenario() -> tuple[bool, bool, int]:
        spare, generation = SpareContext(), object()

        async def fails() -> tuple[Any, Any]:
            raise RuntimeError("the browser went while the page was made")

        async def works() -> tuple[Any, Any]:
            return object(), Page()

        spare.make(generation, fails)  # type: ignore[arg-type]
        failed = await spare.ready()
        spare.make(generation, works)  # type: ignore[arg-type]
        made = await spare.ready()
        taken = await spare.take(lambda g: g is generation)  # type: ignore[arg-type]
        return failed, made and taken is not None, spare.made

    assert asyncio.run(scenario()) == (False, True, 1)
