# ruff: noqa: E501  (page markup and scripts read better unwrapped)
"""What a job may do with its page's requests (issue 38), on the shared local stack in real
Chromium against pages on 127.0.0.1: options.block stops images, fonts and URL globs
before they are sent, counted in the attempt's metrics; a route step answers or aborts
matching requests for the rest of the job, and never answers for a refused address;
options.har keeps the traffic as har.zip with credentials and secrets redacted; an offline
replay of a failed job fails the same way at the same step after the site changed."""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Iterator

import pytest

from devstack.examples import EXAMPLES_DIR, load_example
from devstack.stack import LocalStack
from pagefleet.client import ApiError, Job, PagefleetClient
from pagefleet.jobs.states import JobStatus
from pagefleet.pricing import Worker
from pagefleet.tenancy.spend import per_second_usd
from pagefleet.workflow.masking import encoded_forms
from tests.e2e.test_session_secrets_e2e import put_secret, stored_texts
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


# Random enough never to be in a page by chance; with a character a URL encodes.
SECRET = "Tok3n Z9 r!d"

PROFILE = html(
    """<body><span id="got">pending</span>
<script>
  const token = new URLSearchParams(location.search).get('token');
  document.cookie = 'tok=' + encodeURIComponent(token) + '; path=/';
  fetch('/profile.json', {headers: {Authorization: 'Bearer ' + token}})
    .then(r => r.json()).then(j => { document.getElementById('got').textContent = j.name; });
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
        "/profile": PROFILE,
        # The site echoes the secret in a body and in a cookie it sets.
        "/profile.json": Resource(
            json.dumps({"name": "Ada", "token": SECRET}).encode(),
            "application/json",
            headers={"Set-Cookie": "session=" + SECRET.replace(" ", "_")},
        ),
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


def _har(client: PagefleetClient, job: Job) -> tuple[dict[str, object], dict[str, bytes]]:
    link = next(a for a in client.artifacts(job.job_id) if a.name == "har.zip")
    data = client.download_verified(link)  # its sha256 checked
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    log = next(json.loads(v) for k, v in files.items() if k.endswith(".har"))
    return log, files


@pytest.fixture(scope="module")
def secret(stack: LocalStack) -> str:
    put_secret("har_token", SECRET)
    return "{{secrets.har_token}}"


def _profile_job(site: StepSite, secret: str, har: object, *more: object) -> dict[str, object]:
    return {
        "steps": [
            {"action": "goto", "url": site.url(f"/profile?token={secret}")},
            {"action": "wait_for", "selector": "#got:text-is('Ada')"},
            *more,
        ],
        "options": {"har": har},
    }


def test_a_har_keeps_the_traffic_with_credentials_and_secrets_redacted_before_s3(
    client: PagefleetClient, site: StepSite, stack: LocalStack, secret: str
) -> None:
    job = _run(client, _profile_job(site, secret, True))
    assert job.status is JobStatus.SUCCEEDED, job.error
    # The secret did travel: in the URL, a header, a cookie and a body.
    assert site.seen_headers["/profile.json"]["authorization"] == f"Bearer {SECRET}"
    har = next(a for a in job.artifacts if a.name == "har.zip")
    assert har.retention == "routine" and len(har.sha256) == 64
    log, files = _har(client, job)
    entries = log["log"]["entries"]  # type: ignore[index]
    fetched = next(e for e in entries if e["request"]["url"].endswith("/profile.json"))
    headers = {h["name"].lower(): h["value"] for h in fetched["request"]["headers"]}
    assert headers["authorization"] == "***" and headers["cookie"] == "***"
    answered = {h["name"].lower(): h["value"] for h in fetched["response"]["headers"]}
    assert answered["set-cookie"] == "***"
    body = files[fetched["response"]["content"]["_file"]]
    assert b'"name": "Ada"' in body and b'"token": "***"' in body
    # Nothing the job left in S3 (its har.zip opened) holds the secret in any form.
    for where, text in stored_texts(stack):
        if job.job_id in where:
            for form in encoded_forms(SECRET):
                assert form not in text, f"{form!r} in {where}"


def test_a_har_on_failure_is_kept_only_by_an_attempt_that_failed(
    client: PagefleetClient, site: StepSite, secret: str
) -> None:
    passed = _run(client, _profile_job(site, secret, "on_failure"))
    missing = {"action": "assert", "selector": "#missing", "visible": True, "timeout_ms": 500}
    failed = _run(client, _profile_job(site, secret, "on_failure", missing))
    assert passed.status is JobStatus.SUCCEEDED, passed.error
    assert "har.zip" not in {a.name for a in passed.artifacts}
    assert failed.status is JobStatus.FAILED
    har = next(a for a in failed.artifacts if a.name == "har.zip")
    assert har.retention == "debug"


CART = Resource(b'{"items": 3}', "application/json")


def _checkout(pay_button: bool) -> Resource:
    button = (
        '<button id="pay" onclick="this.textContent=\'paid\'">Pay</button>' if pay_button else ""
    )
    return html(
        f"""<body><span id="items">pending</span>{button}
<script>fetch('/api/cart.json').then(r => r.json()).then(c => {{ document.getElementById('items').textContent = c.items + ' items'; }});</script>
</body>"""
    )


def test_an_offline_replay_fails_the_same_way_on_the_same_step_after_the_site_changed(
    client: PagefleetClient, site: StepSite
) -> None:
    site.resources["/checkout"] = _checkout(pay_button=False)
    site.resources["/api/cart.json"] = CART
    request = {
        "steps": [
            {"action": "goto", "url": site.url("/checkout")},
            {"action": "wait_for", "selector": "#items:text-is('3 items')"},
            {"action": "click", "selector": "#pay", "timeout_ms": 1000},
        ],
        "options": {"har": "on_failure"},
    }
    original = _run(client, request)
    assert original.status is JobStatus.FAILED and original.error is not None
    assert (original.error.kind, original.error.step_index) == ("step_failed", 2)
    # The site is fixed (the button is there) and its cart API gone.
    site.resources["/checkout"] = _checkout(pay_button=True)
    del site.resources["/api/cart.json"]
    asked_before = len(site.asked)
    replay = client.replay(original.job_id)
    assert replay.replay_of == original.job_id
    replayed = client.wait(replay.job_id, timeout=180)
    assert replayed.status is JobStatus.FAILED and replayed.error is not None
    assert (replayed.error.kind, replayed.error.step_index) == ("step_failed", 2), (
        replayed.error.message
    )
    assert replayed.attempt == 1 and replayed.replay_of == original.job_id
    assert site.asked[asked_before:] == []  # the site was never asked
    assert client.get(original.job_id).replays == [replay.job_id]
    site.resources["/api/cart.json"] = CART  # online, the fixed site gets past that step
    fixed = _run(client, {**request, "options": {}})
    assert fixed.status is JobStatus.SUCCEEDED, fixed.error


def test_only_an_ended_job_with_a_har_can_be_replayed(
    client: PagefleetClient, site: StepSite
) -> None:
    without = _run(client, {"steps": [{"action": "goto", "url": site.url("/api")}]})
    with pytest.raises(ApiError) as no_har:
        client.replay(without.job_id)
    assert no_har.value.status == 422 and no_har.value.field == "har"
    later = client.submit(
        {"steps": [{"action": "goto", "url": site.url("/api")}], "delay_seconds": 600}
    )
    with pytest.raises(ApiError) as not_ended:
        client.replay(later.job_id)
    assert not_ended.value.status == 409 and "scheduled" in str(not_ended.value)
    client.cancel(later.job_id)
    with pytest.raises(ApiError) as missing:
        client.replay("0" * 26)
    assert missing.value.status == 404


IDB = html(
    """<body><span id="who">pending</span><input id="note">
<script>
  addEventListener('beforeunload', e => {
    if (document.getElementById('note').value) { e.preventDefault(); e.returnValue = ''; }
  });
  const open = indexedDB.open('auth', 1);
  open.onupgradeneeded = () => open.result.createObjectStore('kv');
  open.onsuccess = () => {
    const db = open.result;
    const show = (text) => { document.getElementById('who').textContent = text; };
    if (location.search.includes('signin')) {
      const tx = db.transaction('kv', 'readwrite');
      tx.objectStore('kv').put({user: 'ada', token: 't-1'}, 'login');
      tx.oncomplete = () => show('signed in as ada');
    } else {
      const got = db.transaction('kv').objectStore('kv').get('login');
      got.onsuccess = () => show(got.result ? 'signed in as ' + got.result.user : 'signed out');
    }
  };
</script></body>"""
)


def test_a_login_kept_in_indexeddb_is_saved_and_restored_at_a_jobs_start_and_mid_job(
    client: PagefleetClient, site: StepSite
) -> None:
    site.resources["/idb"] = IDB
    signed = _run(
        client,
        {
            "steps": [
                {"action": "goto", "url": site.url("/idb?signin=1")},
                {"action": "wait_for", "selector": "#who:text-is('signed in as ada')"},
                {"action": "save_session", "name": "idb-login"},
            ]
        },
    )
    assert signed.status is JobStatus.SUCCEEDED, signed.error
    check = [
        {"action": "goto", "url": site.url("/idb")},
        {"action": "wait_for", "selector": "#who:not(:text-is('pending'))"},
        {"action": "extract", "name": "who", "selector": "#who"},
    ]
    later = _run(client, {"steps": [{"action": "use_session", "name": "idb-login"}, *check]})
    assert later.status is JobStatus.SUCCEEDED, later.error
    assert later.result == {"who": "signed in as ada"}
    fresh = _run(client, {"steps": check})
    assert fresh.result == {"who": "signed out"}
    # Mid-job, on a page that holds the site's database open and asks before it is left
    # (unsaved text): the page must be left and loaded again to restore the database, and its
    # question is answered as any dialog. Dismissed (the default), the step fails saying how
    # to go on; accepted by a dialog step, the login is restored and the page reads it.
    dirty = [*check, {"action": "type", "selector": "#note", "text": "draft"}]
    use = {"action": "use_session", "name": "idb-login"}
    refused = _run(client, {"steps": [*dirty, use]})
    assert refused.status is JobStatus.FAILED and refused.error is not None
    assert refused.error.kind == "step_failed" and refused.error.step_index == 4
    assert '"type": "beforeunload"' in refused.error.message
    leave = {"action": "dialog", "type": "beforeunload"}
    after = {"action": "extract", "name": "after", "selector": "#who"}
    accepted = _run(client, {"steps": [*dirty, leave, use, check[1], after]})
    assert accepted.status is JobStatus.SUCCEEDED, accepted.error
    assert accepted.result == {"who": "signed out", "after": "signed in as ada"}


def test_each_step_shows_its_time_and_share_of_the_price_and_usage_sums_it_by_workflow(
    client: PagefleetClient, site: StepSite
) -> None:
    job = _run(
        client,
        {
            "name": "priced-steps",
            "steps": [
                {"action": "goto", "url": site.url("/assets")},
                {"action": "wait_for", "load_state": "load"},
                {"action": "extract", "name": "nothing", "selector": "#missing", "timeout_ms": 500},
            ],
        },
    )
    assert job.status is JobStatus.FAILED and job.error is not None
    steps = job.attempts[-1].steps
    assert [(s.index, s.action, s.outcome) for s in steps] == [
        (0, "goto", "ok"),
        (1, "wait_for", "ok"),
        (2, "extract", "failed"),
    ]
    # The price of its browser time at the deployment's rate (the local stack's shape).
    rate = per_second_usd(Worker())
    for step in steps:
        assert step.cost_usd == pytest.approx(step.duration_ms / 1000 * rate, abs=rate / 1000)
    finished = [e for e in client.events(job.job_id).events if e.type == "step_finished"]
    assert [(e.index, e.cost_usd) for e in finished] == [(s.index, s.cost_usd) for s in steps]
    # Usage is recorded once the outcome is written: wait for the attempt to be counted.
    usage = client.job_usage(job.job_id)
    for _ in range(300):
        if usage.attempts:
            break
        time.sleep(0.1)
        usage = client.job_usage(job.job_id)
    spent = sum(s.cost_usd for s in steps)
    assert usage.total.cost["us-east-1"].total_usd >= round(spent, 6) > 0
    lines = {w.workflow: w for w in client.usage().workflows}
    assert (
        lines["priced-steps"].cost["us-east-1"].total_usd >= usage.total.cost["us-east-1"].total_usd
    )
