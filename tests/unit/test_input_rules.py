"""A job's ``options.locale`` and a ``press`` step's key are refused when made if the
browser would refuse them.

Before, both were accepted: a locale Chromium refuses failed the context's ``new_page`` on
every attempt (taken for a browser fault, ``browser_crashed``, and retried), and
a key Playwright does not know failed the press after the steps before it had run.
``tests/worker/test_input_rules_chromium.py`` holds both rules to the browser's own answers.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from browser_task.errors import opening_failure
from pagefleet.jobs.locales import locale_problem
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.options import JobOptions
from pagefleet.specs.stored import STORED
from pagefleet.workflow import Press
from pagefleet.workflow.keys import chord, key_problem

GOTO = {"action": "goto", "url": "http://127.0.0.1:9/"}


@pytest.mark.parametrize(
    "tag",
    [
        "en",
        "en-GB",
        "EN-gb",
        "fil",
        "und",
        "zh-Hant-TW",
        "es-419",
        "de-DE-1996",
        "sl-rozaj-biske",
        "en-US-u-ca-buddhist-nu-thai",
        "en-u-foo-ca-gregory",
        "en-t-de-h0-hybrid",
        "en-a-bbb-x-private",
    ],
)
def test_locales_chromium_takes_are_taken(tag: str) -> None:
    assert locale_problem(tag) is None
    assert JobOptions.model_validate({"locale": tag}).locale == tag


@pytest.mark.parametrize(
    ("tag", "reason"),
    [
        ("root", "2 or 3 letters"),
        ("abcde", "2 or 3 letters"),
        ("zh-yue", "'yue' does not fit"),  # an extended language subtag
        ("en-12", "'12' does not fit"),
        ("en-US-US", "'US' does not fit"),
        ("de-1996-1996", "variant '1996' is given twice"),
        ("en-u", "-u- has nothing valid after it"),
        ("en-t-m0", "-t- has nothing valid after it"),
        ("en-a-bb-a-cc", "-a- is given twice"),
        ("en-x", "private use"),
    ],
)
def test_locales_chromium_refuses_are_refused_with_the_reason(tag: str, reason: str) -> None:
    assert reason in (locale_problem(tag) or "")
    with pytest.raises(ValidationError, match="locale") as refused:
        JobOptions.model_validate({"locale": tag})
    assert reason in str(refused.value)


@pytest.mark.parametrize(
    "key",
    ["Enter", "Tab", "a", "A", "+", "Shift++", "Control+A", "ControlOrMeta+a", "Numpad1", "\n"],
)
def test_keys_playwright_presses_are_taken(key: str) -> None:
    assert key_problem(key) is None
    assert Press(selector="#q", key=key).key == key


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("Entr", "did you mean 'Enter'"),
        ("enter", "did you mean 'Enter'"),  # names are case-sensitive
        ("Esc", "did you mean 'Escape'"),
        ("Control+Shift+Arrowleft", "no key 'Arrowleft'"),
        ("F13", "no key 'F13'"),
        ("\u00e9", "use a type step"),
        ("Control+", "ends in a + with no key after it"),
        ("++", "ends in a +"),
    ],
)
def test_keys_playwright_does_not_know_are_refused(key: str, reason: str) -> None:
    assert reason in (key_problem(key) or "")
    with pytest.raises(ValidationError, match="key") as refused:
        Press(selector="#q", key=key)
    assert reason in str(refused.value)


def test_a_chord_splits_as_playwright_splits_it() -> None:
    assert chord("Control+Shift+A") == ["Control", "Shift", "A"]
    assert chord("+") == ["+"]
    assert chord("Shift++") == ["Shift", "+"]
    assert chord("Control+") == ["Control", ""]


def test_a_key_from_an_input_is_checked_filled_in_and_one_from_a_secret_in_the_worker() -> None:
    press = {"action": "press", "selector": "#q", "key": "{{inputs.key}}"}
    JobRequest.model_validate({"steps": [GOTO, press], "inputs": {"key": "Control+A"}})
    with pytest.raises(ValidationError, match=r"steps\[1\] cannot press its key"):
        JobRequest.model_validate({"steps": [GOTO, press], "inputs": {"key": "Entr"}})
    secret = {**press, "key": "{{secrets.KEY}}"}
    assert JobRequest.model_validate({"steps": [GOTO, secret]}).steps[1] == Press(
        selector="#q", key="{{secrets.KEY}}"
    )


def test_records_written_before_the_rules_read_as_written() -> None:
    old = {"steps": [GOTO, {"action": "press", "selector": "#q", "key": "Entr"}]}
    old["options"] = {"locale": "root"}
    request = JobRequest.model_validate(old, context=STORED)
    assert request.options.locale == "root"
    assert request.steps[1] == Press.model_construct(selector="#q", key="Entr", action="press")


LOCALE_REFUSED = "Protocol error (Emulation.setLocaleOverride): Invalid locale name"
HEADER_REFUSED = "Protocol error (Network.setExtraHTTPHeaders): Invalid header name"


@pytest.mark.parametrize(
    ("message", "kind", "retried"),
    [
        (f"BrowserContext.new_page: {LOCALE_REFUSED}", "invalid_workflow", False),
        ("BrowserContext.new_page: Invalid timezone ID: Not/AZone", "invalid_workflow", False),
        (f"BrowserContext.new_page: {HEADER_REFUSED}", "invalid_workflow", False),
        (
            "Browser.new_context: Target page, context or browser has been closed",
            "browser_crashed",
            True,
        ),
        ("Timeout 30000ms exceeded.", "browser_crashed", True),
    ],
)
def test_a_context_that_will_not_open_is_the_jobs_mistake_only_when_chromium_says_so(
    message: str, kind: str, retried: bool
) -> None:
    failure = opening_failure(message + "\nCall log:\n  - a page's words")
    assert (failure.kind, failure.retryable) == (kind, retried)
    assert "Call log" not in failure.message
