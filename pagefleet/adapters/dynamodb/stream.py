"""The jobs table's stream records, as the Lambda event source mapping delivers them, read
into job changes (NEW_AND_OLD_IMAGES; only job items are changes)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pagefleet.adapters.dynamodb.codec import item_to_record
from pagefleet.jobs.changes import JobChange
from pagefleet.models import JobRecord


def job_changes(records: Iterable[Mapping[str, Any]]) -> list[JobChange]:
    """The job changes among a stream batch's records (other items are skipped)."""
    out: list[JobChange] = []
    for record in records:
        body = record.get("dynamodb") or {}
        keys = body.get("Keys") or {}
        if not str((keys.get("sk") or {}).get("S", "")).startswith("JOB#"):
            continue
        out.append(
            JobChange(
                old=_image(body.get("OldImage")),
                new=_image(body.get("NewImage")),
                sequence=str(body.get("SequenceNumber", "")),
            )
        )
    return out


def _image(image: Mapping[str, Any] | None) -> JobRecord | None:
    return item_to_record(image) if image else None
