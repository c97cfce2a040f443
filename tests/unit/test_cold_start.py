"""Handler imports run with the garbage collector paused; it is on again afterwards."""

from __future__ import annotations

import gc

from functions.cold_start import collector_paused


def test_the_collector_is_paused_during_and_on_again_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_someone_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_the_imports_made_is_frozen() -> None:
    before = gc.get_freeze_count()
    with collector_paused():
        made: list[list[int]] = [[] for _ in range(100)]  # tracked, as imports make
    assert gc.get_freeze_count() >= before + len(made)
