"""What changed between a baseline run and this one: ``changes`` of a job.

Tracked lists of records are matched by key, so a reordered list is no change and one
changed price is one changed record (its fields before -> after), not a rewritten list.
Records that share a key are paired in a canonical order, so duplicates do not turn a
reordering into a change either. Any other tracked value is compared whole.

``compare`` is pure: the worker runs it with both results in memory (the costs:
docs/performance.md, "Monitors").
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.monitors.spec import Monitor

# The job record keeps this many entries of each list inline (all are in changes.json).
INLINE_RECORDS = 20
CHANGES_ARTIFACT = "changes.json"
DIFF_ARTIFACT = "diff.png"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)


class FieldChange(_Model):
    before: Any = None
    after: Any = None


class RecordChange(_Model):
    """A record present in both runs whose fields differ: each field before -> after."""

    key: Any = None
    fields: dict[str, FieldChange] = Field(default_factory=dict)


class TrackedChange(_Model):
    """One tracked result: records added, removed and changed (``kind: records``), or the
    value before -> after (``kind: value``)."""

    kind: Literal["records", "value"] = "records"
    added: list[Any] = Field(default_factory=list)
    removed: list[Any] = Field(default_factory=list)
    changed: list[RecordChange] = Field(default_factory=list)
    before: Any = None
    after: Any = None
    truncated: bool = Field(default=False, description="lists cut here; changes.json has all")

    @property
    def count(self) -> int:
        if self.kind == "value":
            return 1
        return len(self.added) + len(self.removed) + len(self.changed)


class ChangeSummary(_Model):
    added: int = 0
    removed: int = 0
    changed: int = 0
    visual_ratio: float | None = Field(
        default=None, description="share of the tracked screenshot's pixels that changed"
    )


class VisualChange(_Model):
    ratio: float
    threshold: float
    changed: bool
    diff_artifact: str | None = Field(default=None, description="diff.png, when over threshold")
    note: str | None = None


class Changes(_Model):
    """A run compared with its baseline (``baseline_job_id``; none on a first run)."""

    changed: bool = False
    summary: ChangeSummary = Field(default_factory=ChangeSummary)
    records: dict[str, TrackedChange] = Field(
        default_factory=dict, description="tracked result name -> what changed in it"
    )
    visual: VisualChange | None = None
    baseline_job_id: str | None = None
    note: str | None = Field(default=None, description="e.g. why there is no baseline")

    @classmethod
    def no_baseline(cls, why: str) -> Changes:
        return cls(changed=False, note=why)

    def inline(self, limit: int = INLINE_RECORDS) -> Changes:
        """The copy a job record (or a webhook) carries: each list cut to ``limit``."""
        cut = {name: _cut(change, limit) for name, change in self.records.items()}
        return self.model_copy(update={"records": cut})


def compare(
    before: dict[str, Any],
    after: dict[str, Any],
    monitor: Monitor,
    *,
    baseline_job_id: str,
    visual: VisualChange | None = None,
) -> Changes:
    """``after`` (this run's result) against ``before`` (the baseline's), as ``monitor``
    tracks them; ``visual`` is the screenshot's comparison, made by the worker."""
    records: dict[str, TrackedChange] = {}
    for name, track in monitor.track.items():
        change = diff_value(before.get(name), after.get(name), track.key)
        if change is not None:
            records[name] = change
    summary = ChangeSummary(
        added=sum(len(c.added) for c in records.values()),
        removed=sum(len(c.removed) for c in records.values()),
        changed=sum(len(c.changed) + (c.kind == "value") for c in records.values()),
        visual_ratio=visual.ratio if visual is not None else None,
    )
    return Changes(
        changed=bool(records) or (visual is not None and visual.changed),
        summary=summary,
        records=records,
        visual=visual,
        baseline_job_id=baseline_job_id,
    )


def diff_value(before: Any, after: Any, key: str | None) -> TrackedChange | None:
    """None when nothing changed. A list that appears or goes is all added or removed."""
    if isinstance(before, list) and after is None:
        after = []
    if isinstance(after, list) and before is None:
        before = []
    if isinstance(before, list) and isinstance(after, list):
        change = diff_records(before, after, key)
        return change if change.count else None
    if canonical(before) == canonical(after):
        return None
    return TrackedChange(kind="value", before=before, after=after)


def diff_records(before: list[Any], after: list[Any], key: str | None) -> TrackedChange:
    """Records matched by ``key``: added, removed, and changed (field by field)."""
    old, new = _grouped(before, key), _grouped(after, key)
    added: list[Any] = []
    removed: list[Any] = []
    changed: list[RecordChange] = []
    # Output in the order of the lists themselves (after for added and changed, before for
    # removed), so a reader sees records where the page shows them.
    for name in _keys_in_order(after, key):
        theirs, ours = old.get(name, []), new[name]
        for index, record in enumerate(ours):
            if index >= len(theirs):
                added.append(record)
            elif (fields := _field_changes(theirs[index], record)) is not None:
                changed.append(RecordChange(key=_key_value(record, key), fields=fields))
    for name in _keys_in_order(before, key):
        theirs, ours = old[name], new.get(name, [])
        removed += theirs[len(ours) :]
    return TrackedChange(kind="records", added=added, removed=removed, changed=changed)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _key_value(record: Any, key: str | None) -> Any:
    if key is not None and isinstance(record, dict):
        return record.get(key)
    return record


def _grouped(records: list[Any], key: str | None) -> dict[str, list[Any]]:
    """Records by their key; records sharing one in canonical order (pairing is stable
    whatever order the page listed them in)."""
    groups: dict[str, list[Any]] = defaultdict(list)
    for record in records:
        groups[canonical(_key_value(record, key))].append(record)
    for name, members in groups.items():
        if len(members) > 1:
            groups[name] = sorted(members, key=canonical)
    return groups


def _keys_in_order(records: list[Any], key: str | None) -> list[str]:
    return list(dict.fromkeys(canonical(_key_value(r, key)) for r in records))


def _field_changes(before: Any, after: Any) -> dict[str, FieldChange] | None:
    if canonical(before) == canonical(after):
        return None
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return {"": FieldChange(before=before, after=after)}
    out = {}
    for name in dict.fromkeys([*before, *after]):
        if canonical(before.get(name)) != canonical(after.get(name)):
            out[name] = FieldChange(before=before.get(name), after=after.get(name))
    return out


def _cut(change: TrackedChange, limit: int) -> TrackedChange:
    """At most ``limit`` entries of each list; 0 keeps none, nor a value's before / after."""
    if limit > 0 and max(len(change.added), len(change.removed), len(change.changed)) <= limit:
        return change
    update: dict[str, Any] = {
        "added": change.added[:limit],
        "removed": change.removed[:limit],
        "changed": change.changed[:limit],
        "truncated": True,
    }
    if limit == 0:
        update.update(before=None, after=None)
    return change.model_copy(update=update)
