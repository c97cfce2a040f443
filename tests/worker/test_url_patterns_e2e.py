"""A job's URL globs meet URLs its page chooses on the worker's shared loop and driver:
one that backtracks without end fails its own job ``invalid_workflow``, and the worker goes
on. Before, ``**a**a**a**a**b`` against a URL of 3,000 a's held Playwright's client (a
``wait_for``'s URL) or its driver (a ``route`` step) for longer than any test waits.

Real Chromium, the worker in-process, pages on 127.0.0.1."""

from __future__ import annotations

import pytest

from pagefleet.jobs.states import JobStatus
from tests.worker.conftest import submit, wait_for_job

pytestmark = pytest.mark.e2e

# Five unbounded wildcards around one character: O(n^5) backtracking where it does not match.
HUNGRY_GLOB = "**a**a**a**a**b"
LONG_PATH = "/" + "a" * 3000

# The page moves its own URL to the long path once loaded.
MOVES = f"<script>history.pushState({{}}, '', '{LONG_PATH}')</script><p id='moved'>moved</p>"
# The page asks for the long path, and says when the request has ended (any way).
FETCHES = (
    "<p id='state'>pending</p><script>"
    f"fetch('{LONG_PATH}').finally(() => document.getElementById('state').textContent = 'ended')"
    "</script>"
)


def test_a_wait_for_url_glob_that_backtracks_fails_its_job(site, services, run_worker) -> None:
    page = site.add("/moves", MOVES)
    ordinary = site.add("/ordinary", "<h1>ok</h1>")
    job = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": page},
                {"action": "wait_for", "url": HUNGRY_GLOB},
            ],
            "options": {"action_timeout_ms": 3000},
        },
    )
    later = submit(
        services,
        {
            "steps": [
                {"action": "goto", "url": ordinary},
                {"action": "wait_for", "url": "**/ordinary"},
            ]
        },
    )
    run_worker()
    done = wait_for_job(services, job.job_id, timeout=120)
    assert done.status is JobStatus.FAILED
    assert done.error is not None and done.error.kind == "invalid_workflow", done.error
    assert "backtracks" in done.error.message and HUNGRY_GLOB in done.error.message
    assert done.error.step_index == 1
    # An ordinary glob on the same worker still matches.
    assert wait_for_job(services, later.job_id, timeout=120).status is JobStatus.SUCCEEDED


def test_a_route_glob_that_backtracks_fails_its_job(site, services, run_worker) -> None:
    page = site.add("/fetches", FETCHES)
    job = submit(
        services,
        {
            "steps": [
                {"action": "route", "url": HUNGRY_GLOB, "abort": True},
                {"action": "goto", "url": page},
                {"action": "wait_for", "selector": "#state:text-is('ended')", "state": "attached"},
                {"action": "extract", "name": "state", "selector": "#state"},
            ],
        },
    )
    run_worker()
    done = wait_for_job(services, job.job_id, timeout=120)
    assert done.status is JobStatus.FAILED
    assert done.error is not None and done.error.kind == "invalid_workflow", done.error
    assert "backtracks" in done.error.message


def test_block_and_route_globs_still_match_as_playwright_globs(site, services, run_worker) -> None:
    page = site.add(
        "/assets",
        "<p id='ads'>pending</p><p id='api'>pending</p><script>"
        "const mark = (id, v) => document.getElementById(id).textContent = v;"
        "fetch('/ads/track.js').then(() => mark('ads', 'sent'), () => mark('ads', 'blocked'));"
        "fetch('/api/price?x=1').then(r => r.text())"
        ".then(t => mark('api', t), () => mark('api', 'x'));"
        "</script>",
    )
    job = submit(
        services,
        {
            "steps": [
                {"action": "route", "url": "**/api/price?*", "fulfill": {"body": "mocked"}},
                {"action": "goto", "url": page},
                *(
                    {"action": "wait_for", "selector": f"#{i}:not(:text-is('pending'))"}
                    for i in ("ads", "api")
                ),
                {"action": "extract", "name": "ads", "selector": "#ads"},
                {"action": "extract", "name": "api", "selector": "#api"},
            ],
            "options": {"block": {"urls": ["**/ads/**", "**/never/*.png"]}},
        },
    )
    run_worker()
    done = wait_for_job(services, job.job_id, timeout=120)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"ads": "blocked", "api": "mocked"}
    assert site.hits.get("/ads/track.js", 0) == 0 and site.hits.get("/api/price", 0) == 0
