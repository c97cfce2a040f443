"""The bounds that keep a job record inside one item, applied to an attempt's outcome."""

from __future__ import annotations

from pagefleet.jobs import record_size
from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.models import Artifact, AttemptRecord, JobRecord, JobRequest
from pagefleet.jobs.states import JobStatus


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
