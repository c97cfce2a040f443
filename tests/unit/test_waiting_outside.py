"""The worker's count of runs waiting for a person outside their slot: at most its cap, none
while it stops, and each place freed once that run's context is closed, or at once when the
run ended before its slot let it go."""

from __future__ import annotations

import asyncio

from browser_task.slot.waiting import OutsideSlots


def test_runs_leave_their_slots_up_to_the_cap_and_free_their_place_when_done() -> None:
    async def scenario() -> None:
        outside = OutsideSlots(2)
        a, b, c = asyncio.Event(), asyncio.Event(), asyncio.Event()
        assert outside.leave(a, stopping=False) and outside.leave(b, stopping=False)
        assert not outside.leave(c, stopping=False) and not c.is_set()  # the cap
        assert outside.held == 2

        work: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        settled = asyncio.Event()

        async def settle() -> None:
            settled.set()

        carried = outside.carry(work, settle())
        await asyncio.sleep(0)
        assert outside.held == 2 and not settled.is_set()  # its context is still open
        work.set_result(None)
        await carried
        assert outside.held == 1 and settled.is_set() and not outside.tasks
        outside.stayed(b)  # b's run ended before its slot saw it leave
        assert outside.held == 0
        outside.stayed(c)  # c never left: nothing to free
        assert outside.held == 0
        assert not outside.leave(asyncio.Event(), stopping=True)  # a stopping worker

    asyncio.run(scenario())


def test_a_failed_run_outside_is_still_settled_and_its_place_freed() -> None:
    async def scenario() -> None:
        outside = OutsideSlots(1)
        assert outside.leave(asyncio.Event(), stopping=False)
        work: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        work.set_exception(RuntimeError("recording failed"))
        settled = asyncio.Event()

        async def settle() -> None:
            settled.set()

        await outside.carry(work, settle())
        assert outside.held == 0 and settled.is_set()
        assert OutsideSlots(0).leave(asyncio.Event(), stopping=False) is False

    asyncio.run(scenario())
