"""Which attempts record a trace and when it is kept (browser_task.browser.tracing), as
Playwright Test's trace option does it; the default records on the first retry only."""

from __future__ import annotations

import pytest

from browser_task.browser.tracing import trace_plan
from pagefleet.specs.traces import TraceMode

# mode -> for attempts 1, 2, 3: None (records none) or (kept on success, kept on failure)
KEPT = (True, True)
FAILURES = (False, True)
MODES: dict[TraceMode | None, tuple[tuple[bool, bool] | None, ...]] = {
    None: (None, KEPT, None),  # the default: on-first-retry
    "off": (None, None, None),
    "on": (KEPT, KEPT, KEPT),
    "retain-on-failure": (FAILURES, FAILURES, FAILURES),
    "on-first-retry": (None, KEPT, None),
    "on-all-retries": (None, KEPT, KEPT),
    "retain-on-first-failure": (FAILURES, None, None),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_each_mode_records_on_the_attempts_playwright_test_records_on(
    mode: TraceMode | None,
) -> None:
    for attempt, expected in enumerate(MODES[mode], start=1):
        plan = trace_plan(mode, attempt, secrets=False)
        got = None if plan is None else (plan.on_success, plan.on_failure)
        assert got == expected, (mode, attempt)


@pytest.mark.parametrize("mode", [m for m in MODES if m != "on"])
def test_a_job_using_secrets_records_only_when_it_asked_for_every_attempts_trace(
    mode: TraceMode | None,
) -> None:
    """A trace holds every action's arguments, a filled password included."""
    assert all(trace_plan(mode, attempt, secrets=True) is None for attempt in (1, 2, 3))
    asked = trace_plan("on", 1, secrets=True)
    assert asked is not None and asked.with_secrets
