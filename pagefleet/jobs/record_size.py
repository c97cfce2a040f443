"""Size bounds that keep every job record inside one DynamoDB item (400 KB).

A record holds the request (checked at submit), then whatever its attempts add: the attempt
log, the error, the artifact list and the result. Each of those is bounded here, so no
outcome write can be refused for its size and no record can outgrow an item:

- a result over ``INLINE_RESULT_MAX_BYTES`` stays only in its ``data.json`` artifact and the
  record keeps a pointer (``result_artifact``) and its size (``result_bytes``); a monitor's
  ``changes`` and a failure's error ``details`` take their room from that same budget, so
  the result stays inline only when it fits beside them;
- error messages and step descriptions are cut to a bounded length;
- the attempt log keeps the last ``ATTEMPT_LOG_MAX`` attempts;
- the artifact list keeps at most ``LISTED_ARTIFACTS_MAX`` entries, this attempt's first;
- a job with irreversible steps keeps one checkpoint per such step (each label clipped), a
  compensation and a resolution record: ``irreversible_reserve_bytes`` of its request, taken
  from what its request may use at submit (a job without them keeps its whole budget).
- a monitor's ``changes`` keep the first records of each list, fewer until they fit
  ``CHANGES_INLINE_MAX_BYTES`` (``changes.json`` has them all);
- the job's error keeps ``ERROR_DETAILS_MAX`` of its ``details`` (at most
  ``ERROR_DETAIL_MAX_BYTES`` each); the attempt log keeps none (its message names the first).
- the latest attempt keeps its first steps' times (``jobs.step_times``), as many as fit the
  room its request left of ``SUBMIT_RECORD_MAX_BYTES`` (at most ``STEP_TIMES_MAX``); an
  earlier attempt's are dropped from the log when a later one ends. They take nothing
  from the reserve: a request of the largest size keeps none.

``SUBMIT_RECORD_MAX_BYTES`` is what the request's part of a record may take at submit: the
item limit less the most all of the above can add.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pagefleet.jobs.checkpoints import CHECKPOINT_LABEL_MAX
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.moves import Outcome
from pagefleet.jobs.record import Artifact, AttemptRecord, JobError, JobRecord
from pagefleet.jobs.step_times import STEP_TIMES_MAX, StepTime
from pagefleet.monitors.changes import INLINE_RECORDS, Changes

ITEM_MAX_BYTES = 400 * 1024
INLINE_RESULT_MAX_BYTES = 32 * 1024
ERROR_MESSAGE_MAX_BYTES = 1000
STEP_DESCRIPTION_MAX_BYTES = 300
ATTEMPT_LOG_MAX = 20
LISTED_ARTIFACTS_MAX = 100
# A run's changes (succeeded) or its error's details (failed) share the result's inline
# budget: the result stays inline only when it fits beside them.
CHANGES_INLINE_MAX_BYTES = 16 * 1024
ERROR_DETAILS_MAX = 20
ERROR_DETAIL_MAX_BYTES = 300
RESULT_ARTIFACT = "data.json"  # the worker's copy of every successful job's result

# Upper bounds of what the outcome parts take once bounded (JSON, attribute names included).
_ERROR_BYTES = ERROR_MESSAGE_MAX_BYTES + STEP_DESCRIPTION_MAX_BYTES + 300
_ATTEMPT_BYTES = _ERROR_BYTES + 300
_ARTIFACT_BYTES = 700  # name <= 100, key = tenant/job/attempt/name, sha256, type
_CHECKPOINT_BYTES = CHECKPOINT_LABEL_MAX + 150
_COMPENSATION_BYTES = 2 * ERROR_MESSAGE_MAX_BYTES + 200
_RESOLUTION_BYTES = 300 + 4 * 500  # who, when, and the skipped steps (at most 500)
OUTCOME_RESERVE_BYTES = (
    INLINE_RESULT_MAX_BYTES
    + ATTEMPT_LOG_MAX * _ATTEMPT_BYTES
    + _ERROR_BYTES
    + LISTED_ARTIFACTS_MAX * _ARTIFACT_BYTES
    + 4 * 1024  # timestamps, lease, index keys and other bookkeeping attributes
)
SUBMIT_RECORD_MAX_BYTES = ITEM_MAX_BYTES - OUTCOME_RESERVE_BYTES
# What a record holds at submit besides its request (ids, times, keys), generously.
_RECORD_FIELDS_BYTES = 8 * 1024


def irreversible_reserve_bytes(request: JobRequest) -> int:
    """What a job's irreversible steps may add to its record besides an outcome's parts."""
    marked = sum(1 for step in request.steps if step.irreversible)
    if not marked:
        return 0
    compensation = _COMPENSATION_BYTES if request.compensate else 0
    return marked * _CHECKPOINT_BYTES + compensation + _RESOLUTION_BYTES


def bounded_steps(request: JobRequest, steps: list[StepTime]) -> list[StepTime]:
    """The first of an attempt's step times that fit the room ``request`` left."""
    room = (
        SUBMIT_RECORD_MAX_BYTES
        - irreversible_reserve_bytes(request)
        - json_bytes(request.model_dump(mode="json"))
        - _RECORD_FIELDS_BYTES
    )
    kept: list[StepTime] = []
    for step in steps[:STEP_TIMES_MAX]:
        room -= json_bytes(step.model_dump(mode="json")) + 1
        if room < 0:
            break
        kept.append(step)
    return kept


def clip(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` of UTF-8 (on a character boundary), marked."""
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return text
    return data[: max_bytes - 3].decode("utf-8", "ignore") + "..."


def bounded_error(error: JobError | None) -> JobError | None:
    if error is None:
        return None
    return error.model_copy(
        update={
            "message": clip(error.message, ERROR_MESSAGE_MAX_BYTES),
            "step": clip(error.step, STEP_DESCRIPTION_MAX_BYTES) if error.step else error.step,
            "kind": clip(error.kind, 100),
            "details": _bounded_details(error.details),
        }
    )


def _bounded_details(details: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if details is None:
        return None
    return [
        {k: clip(str(v), ERROR_DETAIL_MAX_BYTES // 2 - 20) for k, v in d.items()}
        for d in details[:ERROR_DETAILS_MAX]
    ]


def _without_details(error: JobError | None) -> JobError | None:
    return error.model_copy(update={"details": None}) if error is not None else None


def bounded_changes(
    changes: Changes | None,
    *,
    limit: int = INLINE_RECORDS,
    max_bytes: int = CHANGES_INLINE_MAX_BYTES,
) -> dict[str, Any] | None:
    """The changes a record (or a webhook) keeps inline: at most ``limit`` records of each
    list, fewer until they fit ``max_bytes``."""
    if changes is None:
        return None
    while True:
        data = changes.inline(limit).model_dump(mode="json")
        if limit == 0 or json_bytes(data) <= max_bytes:
            # At 0 only the summary is left: records are all in changes.json.
            return data
        limit //= 2


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass(frozen=True)
class BoundedOutcome:
    """What an attempt's outcome write stores, each part within its bound."""

    result: dict[str, Any] | None
    result_artifact: str | None
    result_bytes: int | None
    error: JobError | None
    artifacts: list[Artifact]
    history: AttemptRecord
    # The whole attempt log to store, when appending would pass ATTEMPT_LOG_MAX.
    attempt_log: list[AttemptRecord] | None
    changes: dict[str, Any] | None = None


def bound_outcome(job: JobRecord, outcome: Outcome, *, worker: str, at: str) -> BoundedOutcome:
    """The outcome of ``job``'s current attempt as its record will keep it."""
    result = outcome.result
    size = json_bytes(result) if result is not None else None
    pointer = None
    error = bounded_error(outcome.error)
    changes = bounded_changes(outcome.changes)
    beside = json_bytes(changes) if changes else 0
    beside += json_bytes(error.details) if error is not None and error.details else 0
    if size is not None and size + beside > INLINE_RESULT_MAX_BYTES:
        # data.json holds the whole result when the run succeeded; otherwise (a partial
        # result of a failed run) only its size is kept.
        named = any(a.name == RESULT_ARTIFACT for a in outcome.artifacts)
        pointer = RESULT_ARTIFACT if named else None
        result = None
    # Earlier attempts' artifacts (failure snapshots) stay listed next to this one's.
    current = outcome.artifacts[:LISTED_ARTIFACTS_MAX]
    earlier = [a for a in job.artifacts if a.attempt != job.attempt]
    room = LISTED_ARTIFACTS_MAX - len(current)
    history = AttemptRecord(
        attempt=job.attempt,
        worker=worker,
        started_at=job.started_at or at,
        finished_at=at,
        status=outcome.status,
        error=_without_details(error),
        metrics=outcome.metrics,
        steps=bounded_steps(job.request, outcome.steps),
    )
    log = None
    if len(job.attempts) + 1 > ATTEMPT_LOG_MAX or any(a.steps for a in job.attempts):
        # Whole: at its bound, or to drop an earlier attempt's step times.
        kept = job.attempts[-(ATTEMPT_LOG_MAX - 1) :]
        log = [*(a.model_copy(update={"steps": []}) for a in kept), history]
    return BoundedOutcome(
        result=result,
        result_artifact=pointer,
        result_bytes=size,
        error=error,
        artifacts=(earlier[-room:] if room > 0 else []) + current,
        history=history,
        attempt_log=log,
        changes=changes,
    )
