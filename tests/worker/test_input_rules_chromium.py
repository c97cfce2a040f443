"""The API's locale and key rules agree with the browser's own answers, in both directions:
everything the rule takes, the worker's Chromium and Playwright take, and everything they
refuse, the rule refuses (so a job is refused when made, never after a paid attempt).

Real Chromium, through Playwright, on pages made in the browser (no network).
"""

from __future__ import annotations

import asyncio
import random
import re
import string

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import async_playwright

from devstack.console_browser import chromium_launch_options
from pagefleet.jobs.locales import locale_problem
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.states import JobStatus
from pagefleet.specs.stored import STORED
from pagefleet.workflow.keys import KEY_NAMES, key_problem
from tests.worker.conftest import submit, wait_for_job

# What the field's pattern lets reach the rule (pagefleet.jobs.options).
LOCALE_FIELD = re.compile(r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$")
_LETTERS, _DIGITS = string.ascii_letters, string.digits


def _subtag(rng: random.Random) -> str:
    """A subtag of a shape some part of a tag has (or nearly has)."""

    def some(chars: str, low: int, high: int) -> str:
        return "".join(rng.choice(chars) for _ in range(rng.randint(low, high)))

    shapes = [
        lambda: some(_LETTERS, 2, 3),  # language, region
        lambda: some(_LETTERS, 4, 4),  # script
        lambda: some(_LETTERS, 5, 8),
        lambda: some(_DIGITS, 3, 3),  # region
        lambda: rng.choice(_DIGITS) + some(_LETTERS + _DIGITS, 3, 3),  # variant
        lambda: some(_LETTERS + _DIGITS, 5, 8),  # variant
        lambda: rng.choice("uUtTxXaz1"),  # extension singletons
        lambda: rng.choice(_LETTERS + _DIGITS) + rng.choice(_LETTERS),  # -u- key
        lambda: rng.choice(_LETTERS) + rng.choice(_DIGITS),  # -t- field key
        lambda: some(_LETTERS + _DIGITS, 1, 2),
        lambda: some(_LETTERS + _DIGITS, 3, 8),  # -u- and -t- values
    ]
    return rng.choice(shapes)()


def locale_corpus(count: int) -> list[str]:
    rng = random.Random(20261207)
    tags = ["en", "en-GB", "zh-Hant-TW", "de-DE-1996", "en-US-u-ca-buddhist", "root", "zh-yue"]
    while len(tags) < count:
        first = "".join(rng.choice(_LETTERS) for _ in range(rng.randint(2, 8)))
        tag = "-".join([first] + [_subtag(rng) for _ in range(rng.randint(0, 6))])
        if len(tag) <= 35 and LOCALE_FIELD.match(tag):
            tags.append(tag)
    return tags


def key_corpus() -> list[str]:
    names = sorted(KEY_NAMES)
    near = [n.lower() for n in names] + [n.upper() for n in names] + [n + "s" for n in names]
    characters = [chr(code) for code in range(0x180) if chr(code) not in "\x00"]
    chords = ["Control+A", "ControlOrMeta+a", "Shift++", "Alt+Shift+F4", "Control+Foo"]
    chords += ["Control+", "++", "+", "a+b", "Esc", "F13", "F24", "Clear", "Return", "Ctrl+A"]
    return sorted(set(names + near + characters + chords))


async def _chromium_verdicts(
    tags: list[str], keys: list[str]
) -> tuple[dict[str, bool], dict[str, bool], str, list[str]]:
    """Chromium's verdict on each tag, Playwright's on each key, what opening a page with
    a refused locale said, and any refusal for another reason than the one looked at."""
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(**chromium_launch_options())  # type: ignore[arg-type]
        try:
            # The fault as a job met it: the context's first page fails.
            context = await browser.new_context(locale="root")
            try:
                await context.new_page()
                opened = "opened"
            except PlaywrightError as refused:
                opened = str(refused)
            await context.close()
            context = await browser.new_context()
            page = await context.new_page()
            cdp = await context.new_cdp_session(page)
            locales: dict[str, bool] = {}
            other: list[str] = []
            for tag in tags:
                try:
                    await cdp.send("Emulation.setLocaleOverride", {"locale": tag})
                    locales[tag] = True
                except PlaywrightError as refused:
                    locales[tag] = False
                    if "Invalid locale name" not in str(refused):
                        other.append(f"{tag!r}: {refused}")
            await cdp.send("Emulation.setLocaleOverride", {})
            pressed: dict[str, bool] = {}
            for key in keys:
                try:
                    await page.keyboard.press(key)
                    pressed[key] = True
                except PlaywrightError as refused:
                    pressed[key] = False
                    if "Unknown key" not in str(refused):
                        other.append(f"{key!r}: {refused}")
            return locales, pressed, opened, other
        finally:
            await browser.close()


def test_the_locale_and_key_rules_take_what_the_browser_takes_and_nothing_else() -> None:
    tags, keys = locale_corpus(2500), key_corpus()
    locales, pressed, opened, other = asyncio.run(_chromium_verdicts(tags, keys))

    assert other == []
    assert "Invalid locale name" in opened
    differ = {t: (taken, locale_problem(t)) for t, taken in locales.items()}
    differ = {t: v for t, v in differ.items() if v[0] != (v[1] is None)}
    assert differ == {}, f"the locale rule and Chromium differ on {len(differ)}: {differ}"
    # The corpus reaches both sides of the rule, not only one.
    assert sum(locales.values()) >= 200 and len(locales) - sum(locales.values()) >= 1000

    differ = {k: (taken, key_problem(k)) for k, taken in pressed.items()}
    differ = {k: v for k, v in differ.items() if v[0] != (v[1] is None)}
    assert differ == {}, f"the key rule and Playwright differ on {len(differ)}: {differ}"
    assert all(pressed[name] for name in KEY_NAMES)
    assert len(pressed) - sum(pressed.values()) >= 300


def test_a_record_with_options_chromium_refuses_fails_once_as_the_jobs_mistake(
    site, services, run_worker
) -> None:
    """A job recorded before the locale rule (read as written) still reaches a worker: its
    context does not open, which is the job's doing, not the browser's. Before, it was a
    ``browser_crashed`` retried on fresh browsers to its last attempt."""
    page = site.add("/plain", "<h1>plain</h1>")
    request = JobRequest.model_validate(
        {"steps": [{"action": "goto", "url": page}], "options": {"locale": "root"}},
        context=STORED,
    )
    job = submit(services, request)
    run_worker()
    done = wait_for_job(services, job.job_id, timeout=120)
    assert done.status is JobStatus.FAILED
    assert done.error is not None and done.error.kind == "invalid_workflow", done.error
    assert "Invalid locale name" in done.error.message
    assert done.attempt == 1  # not retried
