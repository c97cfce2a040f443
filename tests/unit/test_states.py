from __future__ import annotations

import pytest

from pagefleet.jobs.states import FINAL_STATES, TRANSITIONS, JobStatus, can_transition, sources_of


def test_every_state_has_a_row() -> None:
    assert set(TRANSITIONS) == set(JobStatus)


def test_final_states_are_exactly_the_ends_of_the_lifecycle() -> None:
    assert FINAL_STATES == {
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
        JobStatus.TIMED_OUT,
        JobStatus.CANCELLED,
        JobStatus.EXPIRED,
    }


@pytest.mark.parametrize("final", sorted(FINAL_STATES))
def test_nothing_leaves_a_final_state(final: JobStatus) -> None:
    assert not any(can_transition(final, target) for target in JobStatus)


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        (JobStatus.QUEUED, JobStatus.RUNNING, True),
        (JobStatus.QUEUED, JobStatus.SUCCEEDED, False),  # must run first
        (JobStatus.RUNNING, JobStatus.SUCCEEDED, True),
        (JobStatus.RUNNING, JobStatus.QUEUED, False),
        (JobStatus.RETRY_SCHEDULED, JobStatus.RUNNING, True),
        (JobStatus.RETRY_SCHEDULED, JobStatus.SUCCEEDED, False),
        (JobStatus.DEAD_LETTERED, JobStatus.QUEUED, True),  # redrive
        (JobStatus.QUEUED, JobStatus.EXPIRED, True),
        (JobStatus.RUNNING, JobStatus.EXPIRED, False),  # the deadline is a latest *start*
        (JobStatus.SCHEDULED, JobStatus.RUNNING, True),  # a due delayed job is claimed
        (JobStatus.SCHEDULED, JobStatus.CANCELLED, True),
        (JobStatus.SCHEDULED, JobStatus.EXPIRED, True),
        (JobStatus.SCHEDULED, JobStatus.SUCCEEDED, False),
        (JobStatus.WAITING, JobStatus.QUEUED, True),  # released by its parents
        (JobStatus.WAITING, JobStatus.CANCELLED, True),  # a parent failed
        (JobStatus.WAITING, JobStatus.RUNNING, False),  # never without being released
        (JobStatus.QUEUED, JobStatus.WAITING, False),
    ],
)
def test_transition_table(current: JobStatus, target: JobStatus, allowed: bool) -> None:
    assert can_transition(current, target) is allowed


def test_sources_of_running_includes_reclaim() -> None:
    assert sources_of(JobStatus.RUNNING) == {
        JobStatus.SCHEDULED,
        JobStatus.QUEUED,
        JobStatus.RETRY_SCHEDULED,
        JobStatus.RUNNING,
        JobStatus.WAITING_FOR_HUMAN,  # resumed by its own worker, never claimed
    }
