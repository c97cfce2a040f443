"""RetryPolicy: exponential backoff with full jitter, capped; errors named by their action."""

from __future__ import annotations

import random

import pytest

from browser_task.errors import FailJob, RetryJob, RotateBrowser, classify_navigation_error
from pagefleet.jobs.models import RetryPolicy


def test_ceiling_doubles_from_the_base_up_to_the_cap():
    policy = RetryPolicy(base_seconds=2, cap_seconds=300)
    assert [policy.ceiling(n) for n in range(1, 10)] == [2, 4, 8, 16, 32, 64, 128, 256, 300]
    assert policy.ceiling(1000) == 300


def test_delay_is_full_jitter_within_zero_and_the_ceiling():
    policy = RetryPolicy()
    rng = random.Random(7)
    for attempt in range(1, 12):
        delays = {policy.delay_seconds(attempt, rng) for _ in range(200)}
        assert min(delays) >= 0
        assert max(delays) <= policy.ceiling(attempt)
    # Full jitter spreads retries out instead of synchronising them.
    assert len({policy.delay_seconds(8, rng) for _ in range(50)}) > 10


@pytest.mark.parametrize(("base", "cap"), [(0, 10), (-1, 10), (10, 5)])
def test_nonsensical_policies_are_refused(base, cap):
    with pytest.raises(ValueError, match="base_seconds"):  # a pydantic ValidationError
        RetryPolicy(base_seconds=base, cap_seconds=cap)


def test_errors_say_what_to_do():
    assert RetryJob("x").retryable
    assert RotateBrowser("x").retryable and RotateBrowser("x").kind == "browser_crashed"
    assert not FailJob("x").retryable
    refused = classify_navigation_error("net::ERR_CONNECTION_REFUSED at http://h/", "http://h/")
    assert isinstance(refused, RetryJob)
    bad = classify_navigation_error("net::ERR_INVALID_URL", "http://h/")
    assert isinstance(bad, FailJob)
    error = FailJob("boom", timeout="action").at_step(3, "click(selector='#a')").to_job_error()
    assert (error.step_index, error.step, error.timeout, error.retryable) == (
        3,
        "click(selector='#a')",
        "action",
        False,
    )
