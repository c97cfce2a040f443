"""What changed between two runs: records matched by key, values before -> after, and a
reordered list that is no change at all, whatever the order (a property test)."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pagefleet.jobs.record_size import CHANGES_INLINE_MAX_BYTES, bounded_changes, json_bytes
from pagefleet.monitors.changes import Changes, VisualChange, compare, diff_records
from pagefleet.monitors.spec import Monitor

PRODUCTS = [
    {"sku": "k1", "name": "Kettle", "price": 24.0, "stock": 3},
    {"sku": "l1", "name": "Lantern", "price": 18.5, "stock": 0},
    {"sku": "t1", "name": "Tarp", "price": 9.99, "stock": 12},
]
WATCH = Monitor.model_validate({"track": {"products": {"key": "sku"}, "title": {}}})


def test_one_price_changed_and_one_product_added_read_as_exactly_that() -> None:
    after = [dict(p) for p in PRODUCTS]
    after[1]["price"] = 21.0
    after.append({"sku": "c1", "name": "Compass", "price": 12.0, "stock": 5})
    changes = compare(
        {"products": PRODUCTS, "title": "Shop"},
        {"products": after, "title": "Shop"},
        WATCH,
        baseline_job_id="b" * 26,
    )
    assert changes.changed and changes.baseline_job_id == "b" * 26
    assert changes.summary.model_dump() == {
        "added": 1,
        "removed": 0,
        "changed": 1,
        "visual_ratio": None,
    }
    products = changes.records["products"]
    assert [r["sku"] for r in products.added] == ["c1"]
    (changed,) = products.changed
    assert changed.key == "l1"
    assert {k: (v.before, v.after) for k, v in changed.fields.items()} == {"price": (18.5, 21.0)}
    assert "title" not in changes.records  # unchanged values are not listed


def test_a_removed_record_and_a_changed_value_are_reported() -> None:
    changes = compare(
        {"products": PRODUCTS, "title": "Shop"},
        {"products": PRODUCTS[:2], "title": "Shop: sale"},
        WATCH,
        baseline_job_id="b" * 26,
    )
    assert [r["sku"] for r in changes.records["products"].removed] == ["t1"]
    title = changes.records["title"]
    assert (title.kind, title.before, title.after) == ("value", "Shop", "Shop: sale")
    assert changes.summary.removed == 1 and changes.summary.changed == 1


def test_a_list_that_appears_is_all_added_and_nothing_tracked_unchanged_is_no_change() -> None:
    first = compare({}, {"products": PRODUCTS}, WATCH, baseline_job_id="b" * 26)
    assert first.summary.added == 3
    same = compare(
        {"products": PRODUCTS, "other": 1},
        {"products": PRODUCTS, "other": 2},
        WATCH,
        baseline_job_id="b" * 26,
    )
    assert not same.changed and same.records == {}


def test_the_visual_part_alone_can_make_a_change() -> None:
    visual = VisualChange(ratio=0.2, threshold=0.01, changed=True, diff_artifact="diff.png")
    changes = compare({}, {}, WATCH, baseline_job_id="b" * 26, visual=visual)
    assert changes.changed and changes.summary.visual_ratio == 0.2


def test_the_inline_copy_is_cut_and_fits_the_record() -> None:
    many = [{"sku": f"s{i}", "blob": "x" * 2000} for i in range(200)]
    changes = compare({"products": []}, {"products": many}, WATCH, baseline_job_id="b" * 26)
    inline = bounded_changes(changes)
    assert inline is not None and json_bytes(inline) <= CHANGES_INLINE_MAX_BYTES
    assert inline["summary"]["added"] == 200  # the counts stay whole
    assert inline["records"]["products"]["truncated"] is True
    assert len(inline["records"]["products"]["added"]) < 20
    assert Changes.model_validate(inline).changed


records = st.lists(
    st.fixed_dictionaries(
        {
            # Few keys, so duplicates (records sharing a key) are common.
            "sku": st.sampled_from(["a", "b", "c", "d", None]),
            "price": st.one_of(st.integers(0, 5), st.floats(0, 5, allow_nan=False)),
            "tags": st.lists(st.sampled_from(["new", "sale"]), max_size=2),
        }
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(items=records, seed=st.integers(0, 2**32 - 1), key=st.sampled_from(["sku", None]))
def test_reordering_a_tracked_list_is_no_change(
    items: list[dict[str, object]], seed: int, key: str | None
) -> None:
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    change = diff_records(items, shuffled, key)
    assert (change.added, change.removed, change.changed) == ([], [], [])
    assert not compare(
        {"products": items},
        {"products": shuffled},
        Monitor.model_validate({"track": {"products": {"key": key}}}),
        baseline_job_id="b" * 26,
    ).changed


@settings(max_examples=200, deadline=None)
@given(before=records, after=records)
def test_counts_add_up_to_the_lists_difference(
    before: list[dict[str, object]], after: list[dict[str, object]]
) -> None:
    change = diff_records(before, after, "sku")
    # Every record of each side is either matched (changed or not) or added / removed.
    assert len(after) - len(change.added) == len(before) - len(change.removed)
    assert json.loads(json.dumps(change.model_dump(mode="json")))  # JSON all the way
