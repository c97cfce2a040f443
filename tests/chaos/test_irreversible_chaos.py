"""Order chaos, small: jobs that each place one order while workers and Chromium die at
random moments, some right between the click and its checkpoint. No order is doubled.
``bench/chaos_orders.py`` runs the same with 200 jobs (docs/irreversible-steps.md)."""

from __future__ import annotations

import pytest

from devstack.order_chaos import OrderChaos, run_order_chaos
from devstack.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# 24 orders: the kills at an order come from a seeded roll per order (5 of the first 24,
# of both kinds); the random kills, during the submissions, come as much more often as
# the submissions are shorter than with 40.
JOBS = 24


def test_no_order_is_placed_twice_while_workers_and_browsers_die(stack: LocalStack) -> None:
    chaos = OrderChaos(
        jobs=JOBS,
        kill_every_s=12 * JOBS / 40,
        chromium_kill_every_s=9 * JOBS / 40,
        kill_at_order=0.15,
        chromium_at_order=0.1,
        drop_rate=0.1,
        settle_timeout_s=600,
    )
    report = run_order_chaos(stack, chaos)
    print(report.line(), dict(report.kills))

    assert not report.unsettled, report.unsettled
    assert not report.doubled, report.doubled
    assert not report.wrong, report.wrong
    assert report.review_with_check == 0
    assert report.statuses["succeeded"] > 0
    # The chaos reached the moment between a click and its checkpoint.
    assert report.kills["worker at an order"] + report.kills["chromium at an order"] > 0
