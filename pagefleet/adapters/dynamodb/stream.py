"""The jobs table's stream records, read as job changes and run events (the item layout is
this adapter package's; ``pagefleet.jobs.changes`` holds the types and the consumers)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pagefleet.adapters.dynamodb.codec import item_to_record
from pagefleet.adapters.dynamodb.dispatch import HAS_DEPENDANTS
from pagefleet.adapters.dynamodb.events import events_item
from pagefleet.jobs.changes import EventsWritten, JobChange, StreamRecord
from pagefleet.jobs.record import JobRecord


def read_records(records: Iterable[Mapping[str, Any]]) -> list[StreamRecord]:
    """Each record of a stream batch, in order, read on its own: one that cannot be read (a
    damaged item) is marked with why, and the records around it are still read."""
    out: list[StreamRecord] = []
    for record in records:
        sequence = str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
        try:
            changes, events = job_changes([record]), event_writes([record])
        except Exception as exc:
            out.append(StreamRecord(sequence, error=f"{type(exc).__name__}: {exc}"[:500]))
            continue
        out.append(
            StreamRecord(
                sequence,
                change=changes[0] if changes else None,
                events=events[0] if events else None,
            )
        )
    return out


def job_changes(records: Iterable[Mapping[str, Any]]) -> list[JobChange]:
    """The job changes among a stream batch's records (other items are skipped)."""
    out: list[JobChange] = []
    for record in records:
        body = record.get("dynamodb") or {}
        keys = body.get("Keys") or {}
        if not str((keys.get("sk") or {}).get("S", "")).startswith("JOB#"):
            continue
        new, old = body.get("NewImage"), body.get("OldImage")
        expires = _expires_at(new)
        out.append(
            JobChange(
                old=_image(old),
                new=_image(new),
                sequence=str(body.get("SequenceNumber", "")),
                written_at=_written_at(body),
                may_have_dependants=new is not None and HAS_DEPENDANTS in new,
                expiry_set=expires if expires != _expires_at(old) else None,
            )
        )
    return out


def event_writes(records: Iterable[Mapping[str, Any]]) -> list[EventsWritten]:
    """The run events among a stream batch's records (writes only; TTL removals skipped)."""
    out: list[EventsWritten] = []
    for record in records:
        body = record.get("dynamodb") or {}
        image = body.get("NewImage")
        item = events_item(image) if image and not body.get("OldImage") else None
        if item is None:
            continue
        out.append(
            EventsWritten(
                tenant_id=item.tenant_id,
                job_id=item.job_id,
                events=item.events,
                sequence=str(body.get("SequenceNumber", "")),
                written_at=_written_at(body),
            )
        )
    return out


def _expires_at(image: Mapping[str, Any] | None) -> int | None:
    value = (image or {}).get("expires_at") or {}
    try:
        return int(value["N"])
    except (KeyError, TypeError, ValueError):
        return None


def _written_at(body: Mapping[str, Any]) -> float | None:
    value = body.get("ApproximateCreationDateTime")
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _image(image: Mapping[str, Any] | None) -> JobRecord | None:
    return item_to_record(image) if image else None
