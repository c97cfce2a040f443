"""The bounds that keep a job record inside one item, applied to an attempt's outcome."""

from __future__ import annotations

from pagefleet.jobs import record_size
from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.record import Artifact, AttemptRecord, JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.step_times import STEP_TIMES_MAX, StepTime


def record(attempt: int, attempts: int = 0, artifacts: int = 0) -> JobRecord:
    return JobRecord(
        tenant_id="t",
        job_id="j1",
        status=JobStatus.RUNNING,
        request=JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://h/"}]}),
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
        correlation_id="c",
        pool="standard",
        attempt=attempt,
        attempts=[
            AttemptRecord(attempt=n + 1, worker="w", started_at="s") for n in range(attempts)
        ],
        artifacts=[artifact(f"old{n}.png", attempt=1) for n in range(artifacts)],
    )


def artifact(name: str, attempt: int) -> Artifact:
    return Artifact(
        name=name, key=f"t/j1/{attempt}/{name}", size=1, content_type="image/png", sha256="0"
    )


def test_attempt_log_keeps_the_last_attempts() -> None:
    job = record(attempt=30, attempts=29)
    bounded = record_size.bound_outcome(job, Outcome(JobStatus.FAILED), worker="w", at="now")
    assert bounded.attempt_log is not None
    assert len(bounded.attempt_log) == record_size.ATTEMPT_LOG_MAX
    assert bounded.attempt_log[-1].attempt == 30
    assert bounded.attempt_log[0].attempt == 30 - record_size.ATTEMPT_LOG_MAX + 1
    # Below the bound the entry is appended, not rewritten.
    short = record_size.bound_outcome(record(2, 1), Outcome(JobStatus.FAILED), worker="w", at="n")
    assert short.attempt_log is None


def test_artifact_list_is_bounded_keeping_this_attempts_first() -> None:
    job = record(attempt=2, artifacts=80)
    mine = [artifact(f"new{n}.png", attempt=2) for n in range(60)]
    outcome = Outcome(JobStatus.SUCCEEDED, artifacts=mine)
    bounded = record_size.bound_outcome(job, outcome, worker="w", at="now")
    assert len(bounded.artifacts) == record_size.LISTED_ARTIFACTS_MAX
    assert bounded.artifacts[-60:] == mine
    assert bounded.artifacts[0].name == "old40.png"  # the newest earlier ones are kept


def test_clip_cuts_on_a_character_boundary() -> None:
    text = "漢" * 1000
    clipped = record_size.clip(text, 100)
    assert len(clipped.encode()) <= 100
    assert clipped.endswith("...")
    assert clipped[:-3] == "漢" * len(clipped[:-3])


def test_the_submit_budget_leaves_room_for_every_outcome() -> None:
    assert (
        record_size.SUBMIT_RECORD_MAX_BYTES + record_size.OUTCOME_RESERVE_BYTES
        == record_size.ITEM_MAX_BYTES
    )
    assert record_size.SUBMIT_RECORD_MAX_BYTES > 256 * 1024  # a full-size body of ASCII fits


def test_changes_and_error_details_share_the_results_inline_budget() -> None:
    from pagefleet.jobs.record import JobError
    from pagefleet.monitors.changes import compare
    from pagefleet.monitors.spec import Monitor

    big = {"rows": [{"sku": f"s{n}", "text": "x" * 140} for n in range(180)]}
    changes = compare(
        {"rows": []},
        big,
        Monitor.model_validate({"track": {"rows": {"key": "sku"}}}),
        baseline_job_id="b" * 26,
    )
    inline = record_size.bounded_changes(changes)
    # Inline alone, but not beside its changes.
    assert record_size.json_bytes(big) < record_size.INLINE_RESULT_MAX_BYTES
    assert record_size.json_bytes(big) + record_size.json_bytes(inline) > (
        record_size.INLINE_RESULT_MAX_BYTES
    )
    data = artifact("data.json", attempt=1)
    won = Outcome(JobStatus.SUCCEEDED, result=big, artifacts=[data], changes=changes)
    bounded = record_size.bound_outcome(record(1), won, worker="w", at="now")
    # The changes stay (cut to fit); the result, no longer fitting beside them, is data.json.
    assert bounded.changes is not None and bounded.changes["summary"]["added"] == 180
    assert record_size.json_bytes(bounded.changes) <= record_size.CHANGES_INLINE_MAX_BYTES
    assert bounded.result is None and bounded.result_artifact == "data.json"
    small = Outcome(JobStatus.SUCCEEDED, result={"a": 1}, artifacts=[data], changes=changes)
    assert record_size.bound_outcome(record(1), small, worker="w", at="n").result == {"a": 1}

    details = [{"path": f"result.rows[{n}]", "reason": "y" * 500} for n in range(50)]
    error = JobError(kind="data_quality", message="bad", details=details)
    lost = Outcome(JobStatus.FAILED, result=big, error=error)
    failed = record_size.bound_outcome(record(1), lost, worker="w", at="now")
    assert failed.error is not None and failed.error.details is not None
    assert len(failed.error.details) == record_size.ERROR_DETAILS_MAX
    assert all(len(d["reason"].encode()) <= 150 for d in failed.error.details)
    assert failed.result is None and failed.result_bytes is not None
    assert failed.history.error is not None and failed.history.error.details is None


def _times(count: int) -> list[StepTime]:
    return [
        StepTime(
            index=n,
            action="wait_for",
            started_at="2026-12-05T07:00:00.000Z",
            duration_ms=123456,
            outcome="ok",
            cost_usd=0.000123456,
        )
        for n in range(count)
    ]


def test_the_latest_attempt_keeps_its_step_times_and_an_earlier_ones_are_dropped() -> None:
    first = record(attempt=1)
    outcome = Outcome(JobStatus.RETRY_SCHEDULED, steps=_times(3))
    bounded = record_size.bound_outcome(first, outcome, worker="w", at="now")
    assert bounded.history.steps == _times(3) and bounded.attempt_log is None
    # The second attempt rewrites the log with the first's times dropped.
    second = record(attempt=2).model_copy(update={"attempts": [bounded.history]})
    again = record_size.bound_outcome(
        second, Outcome(JobStatus.SUCCEEDED, steps=_times(2)), worker="w", at="n"
    )
    assert again.attempt_log is not None
    assert [(a.attempt, len(a.steps)) for a in again.attempt_log] == [(1, 0), (2, 2)]


def test_step_times_take_only_the_room_the_request_left() -> None:
    many = _times(STEP_TIMES_MAX + 20)
    small = record_size.bounded_steps(record(1).request, many)
    assert len(small) == STEP_TIMES_MAX  # the first of them
    assert small[0].index == 0
    # A request of (nearly) the largest size a record may hold keeps none, so the record
    # still fits one item with every other part at its bound.
    big = JobRequest.model_validate(
        {
            "steps": [{"action": "goto", "url": "http://h/"}],
            "inputs": {"blob": "x" * (record_size.SUBMIT_RECORD_MAX_BYTES - 8 * 1024)},
        }
    )
    assert record_size.bounded_steps(big, many) == []
