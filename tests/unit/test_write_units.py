"""How `bench/write_units.py` counts DynamoDB's write units: the table's, and each global
secondary index's by AWS's rules (enter, leave, a key that moves, an update in place)."""

from __future__ import annotations

from typing import Any

from bench.write_units import item_size, number_size, units, write_units
from pagefleet.specs.resources import JOBS_TABLE


def image(**fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"pk": {"S": "T#t"}, "sk": {"S": "JOB#j"}}
    for name, value in fields.items():
        out[name] = {"N": str(value)} if isinstance(value, int) else {"S": value}
    return out


def test_items_are_sized_as_dynamodb_sizes_them() -> None:
    assert item_size({"ab": {"S": "héllo"}}) == 2 + 6
    assert number_size("12345") == 4 and number_size("-0.0012300") == 3
    assert item_size({"l": {"L": [{"S": "ab"}, {"BOOL": True}]}}) == 1 + 3 + (1 + 2) + (1 + 1)
    assert item_size({"m": {"M": {"k": {"NULL": True}}}}) == 1 + 3 + (1 + 1 + 1)
    assert [units(0), units(1), units(1024), units(1025)] == [0, 1, 1, 2]


def test_an_index_bills_an_entry_a_key_that_moves_and_an_update_in_place() -> None:
    body = "x" * 1500  # a 1.5 KB record: two units a write
    queued = image(status_pk="t#queued", unqueued_pk="u#1", created_at="c", body=body)
    marked = image(status_pk="t#queued", created_at="c", body=body, enqueued_at="e")
    running = image(status_pk="t#running", ops_pk="lease#1", ops_sk="0001", body=body)
    renewed = image(status_pk="t#running", ops_pk="lease#1", ops_sk="0002", body=body)

    created = write_units(None, queued, JOBS_TABLE.indexes)
    assert (created.table, dict(created.indexes)) == (2, {"by_status": 2, "unqueued": 2})
    mark = write_units(queued, marked, JOBS_TABLE.indexes)  # leaves unqueued, by_status in place
    assert (mark.table, dict(mark.indexes)) == (2, {"by_status": 2, "unqueued": 2})
    claim = write_units(marked, running, JOBS_TABLE.indexes)  # by_status's key moves: two
    assert (claim.table, dict(claim.indexes)) == (2, {"by_status": 4, "ops": 2})
    beat = write_units(running, renewed, JOBS_TABLE.indexes)
    assert (beat.table, dict(beat.indexes)) == (2, {"by_status": 2, "ops": 4})
    assert beat.total == 8
    # An item in no index (a run event) bills the table alone; an unchanged index nothing.
    event = write_units(None, image(body="y" * 100), JOBS_TABLE.indexes)
    assert (event.table, dict(event.indexes)) == (1, {})
    assert write_units(running, running, JOBS_TABLE.indexes).indexes == {}
