"""What each failure calls for (retry, fail, rotate the browser), decided in one place
(``browser_task.errors``) from what the run knew: no browser, no network."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from browser_task.egress.http import POLICY, UNREACHABLE, UPSTREAM_AUTH, Refused
from browser_task.errors import (
    FailJob,
    RetryJob,
    RotateBrowser,
    RunState,
    classify_playwright_error,
    proxy_refused,
    refused_navigation,
    target_unavailable,
)
from pagefleet.workflow import STEP_ADAPTER, Step

GOTO = STEP_ADAPTER.validate_python({"action": "goto", "url": "https://shop.test/"})
CLICK = STEP_ADAPTER.validate_python({"action": "click", "selector": "#buy"})
RUN = RunState(timeout_ms=5000, timeout="action")


@dataclass
class Tunnel:
    host: str
    port: int
    reason: str | None
    kind: str | None


def classify(exc: PlaywrightError, step: Step, **state: object) -> object:
    return classify_playwright_error(exc, step, RunState(**{**RUN.__dict__, **state}))


def test_a_slow_target_is_retried_and_a_missing_element_is_not() -> None:
    slow = classify(PlaywrightTimeoutError("Timeout 5000ms exceeded"), GOTO, timeout="navigation")
    assert isinstance(slow, RetryJob) and slow.timeout == "navigation"
    assert "loading https://shop.test/" in slow.message
    missing = classify(PlaywrightTimeoutError("Timeout 5000ms exceeded"), CLICK)
    assert isinstance(missing, FailJob) and missing.timeout == "action"
    assert "waiting for selector '#buy'" in missing.message


def test_a_browser_that_went_away_is_rotated_unless_the_run_closed_it() -> None:
    gone = PlaywrightError("Target page, context or browser has been closed")
    assert isinstance(classify(gone, CLICK), RotateBrowser)
    assert isinstance(classify(PlaywrightError("anything"), CLICK, crashed=True), RotateBrowser)
    cancelled = classify(gone, CLICK, closed=True)
    assert isinstance(cancelled, FailJob) and not isinstance(cancelled, RetryJob)


def test_the_scheme_watch_stops_the_job_whatever_playwright_said() -> None:
    stopped = classify(PlaywrightError("closed"), CLICK, stopped="file: is not allowed")
    assert isinstance(stopped, FailJob) and stopped.kind == "egress_refused"


def test_the_egress_filters_refusals_of_a_navigation() -> None:
    blocked = PlaywrightError("net::ERR_BLOCKED_BY_CLIENT at https://shop.test/")
    policy = classify(blocked, GOTO, refusals=["10.0.0.1 is a private address"])
    assert isinstance(policy, FailJob) and policy.kind == "egress_refused"
    unresolved = classify(blocked, GOTO, refusals=["could not resolve shop.test"])
    assert isinstance(unresolved, RetryJob) and unresolved.kind == "navigation_failed"
    tunnel = PlaywrightError("net::ERR_TUNNEL_CONNECTION_FAILED at https://shop.test/")
    refused = [Tunnel("shop.test", 443, "bad credentials", UPSTREAM_AUTH)]
    auth = classify(tunnel, GOTO, tunnel_refusals=lambda: refused)
    assert isinstance(auth, FailJob) and auth.kind == "proxy_auth_failed"
    assert "shop.test:443" in auth.message


@pytest.mark.parametrize(
    ("status", "retried"), [(200, False), (404, False), (429, True), (500, True), (503, True)]
)
def test_the_targets_answer(status: int, retried: bool) -> None:
    failure = target_unavailable("https://shop.test/", status)
    assert (failure is not None) is retried
    if failure is not None:
        assert failure.retryable and failure.kind == "target_unavailable"
        assert failure.origin == "https://shop.test:443"


def test_a_redirected_navigation_charges_the_origin_that_answered() -> None:
    failure = target_unavailable("https://shop.test/", 503, "https://cdn.shop.test/down")
    assert failure is not None and failure.origin == "https://cdn.shop.test:443"


def test_a_navigation_or_a_proxy_refused_before_any_browser_work() -> None:
    assert isinstance(refused_navigation("https://x/", "could not resolve x"), RetryJob)
    assert refused_navigation("https://x/", "loopback").kind == "egress_refused"
    assert isinstance(proxy_refused(Refused(502, "no route", UNREACHABLE)), RetryJob)
    assert proxy_refused(Refused(403, "private address", POLICY)).kind == "egress_refused"
