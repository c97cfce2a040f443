"""One backoff (``pagefleet.backoff``): its bounds hold for any base, cap, attempt and draw,
and each user's waits stay inside what it waits on allows (SQS's longest message delay, a
visibility timeout's 12 hours)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pagefleet.backoff import Backoff, Jitter
from pagefleet.jobs.models import RetryPolicy
from pagefleet.jobs.service import REPLAY_BACKOFF, REPLAY_TRIES
from pagefleet.notify.sender import WEBHOOK_BACKOFF, backoff_s
from pagefleet.tenancy.gate import DEFER_BACKOFF, defer_delay

SQS_MAX_DELAY_S = 900  # DelaySeconds and a deferral's delay
VISIBILITY_MAX_S = 43_200  # ChangeMessageVisibility: the webhook queue's backoff

seconds = st.floats(min_value=1e-3, max_value=1e5, allow_nan=False, allow_infinity=False)
attempts = st.integers(min_value=-3, max_value=5_000)
draws = st.integers(min_value=0, max_value=2**32)


@st.composite
def backoffs(draw: st.DrawFn) -> Backoff:
    low, high = sorted((draw(seconds), draw(seconds)))
    return Backoff(low, high, draw(st.sampled_from(Jitter)))


@given(backoffs(), attempts)
def test_the_ceiling_starts_at_the_base_doubles_and_stops_at_the_cap(
    backoff: Backoff, attempt: int
) -> None:
    ceiling = backoff.ceiling(attempt)
    assert backoff.base_s <= ceiling <= backoff.cap_s
    assert backoff.ceiling(1) == backoff.base_s
    assert ceiling <= backoff.ceiling(attempt + 1) <= max(2 * ceiling, ceiling)
    assert backoff.ceiling(attempt + 1) in (backoff.cap_s, 2 * ceiling) or attempt < 1


@given(backoffs(), attempts, draws)
def test_each_jitter_keeps_its_wait_inside_its_bounds(
    backoff: Backoff, attempt: int, seed: int
) -> None:
    ceiling = backoff.ceiling(attempt)
    wait = backoff.delay(attempt, random.Random(seed))
    low, high = {
        Jitter.NONE: (ceiling, ceiling),
        Jitter.FULL: (0.0, ceiling),
        Jitter.EQUAL: (ceiling / 2, ceiling),
        Jitter.ADDED: (ceiling, ceiling * 1.5),
    }[backoff.jitter]
    assert low <= wait <= high


@given(st.sampled_from([Jitter.FULL, Jitter.EQUAL, Jitter.ADDED]))
def test_a_jittered_wait_is_spread_and_an_unjittered_one_is_not(jitter: Jitter) -> None:
    rng = random.Random(3)
    assert len({Backoff(1, 60, jitter).delay(4, rng) for _ in range(20)}) > 10
    assert {Backoff(1, 60, Jitter.NONE).delay(4, rng) for _ in range(20)} == {8.0}


@given(st.integers(min_value=1, max_value=10), st.integers(min_value=0, max_value=10))
def test_the_ladder_tries_first_at_once_then_waits_each_ceiling(tries: int, seed: int) -> None:
    backoff = Backoff(0.05, 0.8, Jitter.NONE)
    ladder = list(backoff.ladder(tries, random.Random(seed)))
    assert ladder == [0.0] + [backoff.ceiling(n) for n in range(1, tries)]


@pytest.mark.parametrize(("base", "cap"), [(0, 1), (-1, 1), (2, 1)])
def test_a_backoff_needs_a_positive_base_at_most_its_cap(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="0 < base <= cap"):
        Backoff(base, cap, Jitter.FULL)


def test_a_backoff_is_a_value() -> None:
    backoff = Backoff(1, 2, Jitter.FULL)
    assert backoff == Backoff(1, 2, Jitter.FULL) and hash(backoff) == hash(
        Backoff(1, 2, Jitter("full"))
    )
    with pytest.raises(AttributeError):
        backoff.cap_s = 3  # type: ignore[misc]


# Each user of the backoff, held to the limit of what it waits on.


@given(
    st.floats(min_value=0.01, max_value=300),
    st.floats(min_value=300, max_value=900),
    attempts,
    draws,
)
def test_a_jobs_retry_waits_whole_seconds_in_full_jitter_within_sqs_delays(
    base: float, cap: float, attempt: int, seed: int
) -> None:
    policy = RetryPolicy(base_seconds=base, cap_seconds=cap)
    assert policy.backoff.jitter is Jitter.FULL
    delay = policy.delay_seconds(attempt, random.Random(seed))
    assert 0 <= delay <= policy.ceiling(attempt) <= SQS_MAX_DELAY_S


@given(st.integers(min_value=1, max_value=5_000), draws)
def test_a_webhook_retry_waits_at_least_half_its_ceiling_and_a_second(
    attempt: int, seed: int
) -> None:
    ceiling = WEBHOOK_BACKOFF.ceiling(attempt)
    delay = backoff_s(WEBHOOK_BACKOFF, attempt, random.Random(seed))
    assert max(1, round(ceiling / 2)) <= delay <= round(ceiling) <= VISIBILITY_MAX_S


@given(st.integers(min_value=0, max_value=5_000), st.floats(0, 1e7), draws)
def test_a_deferral_waits_at_least_its_ceiling_and_never_past_sqs_delays(
    deferrals: int, backlog_s: float, seed: int
) -> None:
    delay = defer_delay(deferrals, random.Random(seed), backlog_s=backlog_s)
    floor = max(DEFER_BACKOFF.ceiling(deferrals + 1), min(backlog_s, 600))
    assert round(floor) <= delay <= round(floor * 1.5) <= SQS_MAX_DELAY_S


def test_an_idempotent_replay_looks_again_at_once_then_up_to_0_8_seconds() -> None:
    assert list(REPLAY_BACKOFF.ladder(REPLAY_TRIES)) == [0.0, 0.05, 0.1, 0.2, 0.4, 0.8]
