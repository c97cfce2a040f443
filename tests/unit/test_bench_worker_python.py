"""bench/worker_python.py: protocol messages counted by kind between the markers, and a
profile that covers only what ran between two marks (bench/profile_hook.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from bench.profile_hook import ThreadProfiles, difference
from bench.worker_python import END, START, messages, top

LOG = "\n".join(
    [
        'pw:channel SEND> {"id": 1, "guid": "page@1", "method": "goto", "params": {}}',
        START,
        'pw:channel SEND> {"id": 2, "guid": "browser-context@2", "method": "newPage"}',
        'pw:channel SEND> {"id": 3, "guid": "browser-context@2", "method": "updateSubscription"}',
        '2026-12-05T16:20:00.000Z pw:protocol SEND ► {"id": 7, "method": "Page.navigate"}',
        '2026-12-05T16:20:00.001Z pw:protocol ◀ RECV {"id": 7, "result": {}}',
        '2026-12-05T16:20:00.002Z pw:protocol ◀ RECV {"method": "Page.lifecycleEvent"}',
        (
            'pw:channel <EVENT {"guid": "page@1", "method": "__create__", '
            '"params": {"type": "Request", "guid": "request@3"}}'
        ),
        'pw:channel <EVENT {"guid": "browser-context@2", "method": "request", "params": {}}',
        'pw:channel <RECV {"id": 2, "result": {}}',
        END,
        'pw:channel SEND> {"id": 9, "guid": "page@1", "method": "close"}',
    ]
)


def test_messages_are_counted_a_job_by_direction_object_and_method_between_the_markers(
    tmp_path: Path,
) -> None:
    log = tmp_path / "stderr.log"
    log.write_text(LOG + "\n", encoding="utf-8")
    counted = messages(log, jobs=2)
    assert counted == {
        "client>driver browser-context.newPage": 0.5,
        "client>driver browser-context.updateSubscription": 0.5,
        "driver>Chromium Page.navigate": 0.5,
        "CDP: replies": 0.5,
        "Chromium>driver Page.lifecycleEvent": 0.5,
        "driver>client page.__create__ Request": 0.5,
        "driver>client browser-context.request": 0.5,
        "client: replies": 0.5,
    }


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def _before_the_window(n: int) -> int:
    return _spin(n)


def _in_the_window(n: int) -> int:
    return _spin(n)


def test_a_profile_holds_what_ran_between_two_snapshots_in_every_thread() -> None:
    profiles = ThreadProfiles()
    try:
        first = threading.Thread(target=_before_the_window, args=(20_000,))
        first.start()
        first.join()
        before = profiles.snapshot()
        second = threading.Thread(target=_in_the_window, args=(20_000,))
        second.start()
        second.join()
        after = profiles.snapshot()
    finally:
        threading.setprofile(None)
    names = {name: calls for _path, _line, name, calls, _own, _cum in difference(before, after)}
    assert names.get("_in_the_window") == 1
    assert names.get("_spin") == 1  # the one call made in the window
    assert "_before_the_window" not in names
    listed = top(difference(before, after), jobs=1, count=50)
    assert any(row[0].endswith(" _in_the_window") for row in listed["cumulative"])
    json.dumps(listed)  # what the child hands the bench process
