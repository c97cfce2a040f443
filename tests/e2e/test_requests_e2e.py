# ruff: noqa: E501  (page markup and scripts read better unwrapped)
"""What a job may do with its page's requests (issue 38), on the shared local stack in real
Chromium against pages on 127.0.0.1: options.block stops images, fonts and URL globs
before they are sent, counted in the attempt's metrics; a route step answers or aborts
matching requests for the rest of the job, and never answers for a refused address."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.examples import EXAMPLES_DIR, load_example
from devstack.stack import LocalStack
from pagefleet.client import Job, PagefleetClient
from pagefleet.jobs.states import JobStatus
from tests.worker.site_pages import Resource, StepSite, html, serve

pytestmark = [pytest.mark.e2e]

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)

ASSETS = html(
    """<head><style>@font-face { font-family: F; src: url('/font.woff2'); } p { font-family: F; }</style>
  <link rel="stylesheet" href="/style.css"></head>
<body><p>text in a web font</p><span id="img">pending</span><span id="ads">no ads</span>
  <img id="pic" src="/pic.png" onload="document.getElementById('img').textContent='loaded'" onerror="document.getElementById('img').textContent='blocked'">
  <script src="/ads/track.js"></script>
</body>"""
)

API = html(
    """<body><span id="price">pending</span><span id="stock">pending</span><span id="meta">pending</span>
<script>
  const show = (id, text) => { document.getElementById(id).textContent = text; };
  fetch('/api/price').then(r => r.json()).then(j => show('price', 'price ' + j.price), () => show('price', 'failed'));
  fetch('/api/stock').then(r => r.text()).then(t => show('stock', t), () => show('stock', 'failed'));
  fetch('http://169.254.169.254/latest/meta-data/').then(r => r.text()).then(t => show('meta', t), () => show('meta', 'failed'));
</script></body>"""
)


@pytest.fixture(scope="module")
def site() -> Iterator[StepSite]:
    pages = {
        "/assets": ASSETS,
        "/api": API,
        "/pic.png": Resource(PNG, "image/png"),
        "/font.woff2": Resource(b"wOF2", "font/woff2"),
        "/style.css": Resource(b"body { color: #333 }", "text/css"),
        "/ads/track.js": Resource(
            b"document.getElementById('ads').textContent='ads ran'", "text/javascript"
        ),
        "/api/stock": Resource(b"in stock", "text/plain"),
    }
    with serve(pages) as served:
        yield served


def _run(client: PagefleetClient, request: dict[str, object]) -> Job:
    job = client.submit({"max_attempts": 1, **request})
    return client.wait(job.job_id, timeout=180)


def _extract(*ids: str) -> list[dict[str, str]]:
    # After the page's requests settled: each span is past "pending".
    waits = [
        {"action": "wait_for", "selector": f"#{i}:not(:text-is('pending'))", "state": "attached"}
        for i in ids
    ]
    return [*waits, *({"action": "extract", "name": i, "selector": f"#{i}"} for i in ids)]


def test_block_keeps_images_fonts_and_named_urls_from_being_sent_and_counts_them(
    client: PagefleetClient, site: StepSite
) -> None:
    job = _run(
        client,
        {
            "steps": [
                {"action": "goto", "url": site.url("/assets")},
                {"action": "wait_for", "load_state": "load"},
                *_extract("img", "ads"),
            ],
            "options": {"block": {"resource_types": ["image", "font"], "urls": ["**/ads/**"]}},
        },
    )
    assert job.status is JobStatus.SUCCEEDED, job.error
    assert job.result == {"img": "blocked", "ads": "no ads"}
    # Never sent: the site did not see them; the stylesheet (not blocked) was fetched.
    assert {"/pic.png", "/font.woff2", "/ads/track.js"}.isdisjoint(site.seen_headers)
    assert "/style.css" in site.seen_headers
    metrics = job.attempts[-1].metrics
    assert metrics is not None and metrics.blocked == 3 and metrics.routed == 0
    assert metrics.requests is not None and metrics.requests >= 5


def test_a_route_step_mocks_and_aborts_for_the_rest_of_the_job_but_never_answers_a_refused_address(
    client: PagefleetClient, site: StepSite
) -> None:
    cors = {"Access-Control-Allow-Origin": "*", "Content-Type": "application/json"}
    job = _run(
        client,
        {
            "steps": [
                {
                    "action": "route",
                    "url": "**/api/price",
                    "fulfill": {"headers": cors, "body": '{"price": 42}'},
                },
                {"action": "route", "url": "**/api/stock", "abort": True},
                # A page made to believe the metadata service answered: never.
                {
                    "action": "route",
                    "url": "http://169.254.169.254/**",
                    "fulfill": {"headers": cors, "body": "instance-secret"},
                },
                {"action": "goto", "url": site.url("/api")},
                *_extract("price", "stock", "meta"),
            ],
        },
    )
    assert job.status is JobStatus.SUCCEEDED, job.error
    assert job.result == {"price": "price 42", "stock": "failed", "meta": "failed"}
    assert "/api/stock" not in site.seen_headers  # aborted in the browser
    metrics = job.attempts[-1].metrics
    assert metrics is not None
    assert (metrics.routed, metrics.route_refused, metrics.blocked) == (2, 1, 0)


def test_the_block_and_mock_example_shows_the_mocked_stock_on_the_demo_site(
    client: PagefleetClient, stack: LocalStack
) -> None:
    body = load_example(EXAMPLES_DIR / "network-block-and-mock.json", stack.site_url)
    job = client.wait(client.submit(body).job_id, timeout=180)
    assert job.status is JobStatus.SUCCEEDED, job.error
    assert job.result == {"stock": "3 in stock"}
    metrics = job.attempts[-1].metrics
    assert metrics is not None and (metrics.routed, metrics.blocked) == (1, 1)
