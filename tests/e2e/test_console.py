"""The web console in real Chromium against the local stack: signing in, the jobs list and
a job's page updating live, Cancel, the submit form's field errors, tenant isolation, and
axe-core's accessibility check on every view."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect
from typer.testing import CliRunner

from devstack.console_browser import console_browser, sign_in
from devstack.stack import LocalStack
from pagefleet import cli
from pagefleet.client import ApiError, PagefleetClient
from tests.support.monitors import run_now, set_shop, watcher_spec

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Deadlines for what the page must show, long enough for a loaded 2-core machine.
SHOWN_MS = 60_000
expect.set_options(timeout=SHOWN_MS)
SCREENSHOT_STEPS = [
    {"action": "goto", "url": "{{inputs.site}}"},
    {"action": "screenshot", "name": "page.png"},
]


def slow_steps(seconds: int) -> list[dict[str, Any]]:
    """A job that runs for about ``seconds``: long enough to be watched, or cancelled."""
    return [
        {"action": "goto", "url": "{{inputs.site}}"},
        *({"action": "sleep", "ms": 1000} for _ in range(seconds)),
        {"action": "screenshot", "name": "page.png"},
    ]


@pytest.fixture(scope="module")
def browser(stack: LocalStack) -> Iterator[Browser]:
    with console_browser() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser, stack: LocalStack) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    opened = context.new_page()
    opened.set_default_timeout(SHOWN_MS)
    yield opened
    context.close()


@pytest.fixture
def signed_in(page: Page, stack: LocalStack) -> Page:
    assert stack.dev_api_key is not None
    sign_in(page, stack.console_url, stack.dev_api_key)
    return page


def serious_violations(page: Page) -> list[str]:
    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v.get("impact") in ("serious", "critical")
    ]


def test_the_console_is_served_at_the_api_url_with_a_strict_policy(stack: LocalStack) -> None:
    import httpx

    page = httpx.get(stack.console_url)
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    config = httpx.get(f"{stack.console_url}config.json").json()
    assert config["api_base"] == "/v1"
    assert config["websocket_url"] == stack.live.url


def test_local_up_prints_the_console_link(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    import httpx

    from pagefleet.cli import render

    render.print_stack(stack)
    out = capsys.readouterr().out
    link = re.search(r"console\s+(http://\S+)", out)
    assert link is not None and link.group(1) == f"{stack.api_url}/console/"
    assert "<title>pagefleet console</title>" in httpx.get(link.group(1)).text


def test_a_wrong_key_gets_a_clear_message(page: Page, stack: LocalStack) -> None:
    page.goto(stack.console_url)
    page.get_by_label("API key").fill("pf_not-a-real-key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert").filter(has_text="not accepted")).to_be_visible()
    expect(page.get_by_role("heading", name="Jobs")).to_have_count(0)


def test_a_submitted_job_appears_and_its_page_shows_the_screenshot(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    page = signed_in
    page.evaluate("window.__notReloaded = true")
    job = client.submit({"steps": SCREENSHOT_STEPS, "inputs": {"site": stack.site_url}})
    row = page.locator(f'tr[data-job-id="{job.job_id}"]')
    expect(row).to_be_visible()  # arrived over the WebSocket: the list was not reloaded
    expect(row.locator(".badge")).to_have_text("succeeded")
    assert page.evaluate("window.__notReloaded") is True

    row.get_by_role("link", name=job.job_id).click()
    expect(page.locator("#job-status")).to_have_text("succeeded")
    shot = page.locator(".shots img").first
    expect(shot).to_be_visible()
    # Rendered, not just linked: the presigned image loaded and has pixels.
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=shot.element_handle())
    expect(page.get_by_role("cell", name=re.compile(r"^[0-9a-f]{64}$")).first).to_be_visible()


def test_a_jobs_artifact_links_are_made_again_before_s3_refuses_them(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    """Presigned links run out (S3 refuses them after ``expires_in``, as the embedded AWS now
    does): a page left open lists them again before, and a link followed late (no timer ran:
    a computer asleep) is listed again before it is followed."""
    job = client.submit({"steps": SCREENSHOT_STEPS, "inputs": {"site": stack.site_url}})
    client.wait(job.job_id, timeout=SHOWN_MS / 1000)
    life_s = client.artifacts(job.job_id)[0].expires_in
    assert life_s is not None
    page = signed_in
    page.clock.install()  # the page's timers and Date from here are the test's to move

    def listing(request: Any) -> bool:
        return bool(request.url.split("?")[0].endswith(f"/jobs/{job.job_id}/artifacts"))

    with page.expect_request(listing):
        page.goto(f"{stack.console_url}#/jobs/{job.job_id}")
    download = page.locator('a[data-link="download:page.png"]')
    expect(download).to_be_visible()
    # Left open: read again at 80 % of the links' life, with nothing else to prompt it.
    download.evaluate("a => { a.dataset.shown = 'before' }")
    with page.expect_request(listing):
        page.clock.fast_forward(int(life_s * 0.8 * 1000) + 1000)
    # Shown again (the new links' time is set as they are shown) before the clock moves on.
    expect(page.locator('a[data-link="download:page.png"]:not([data-shown])')).to_be_visible()
    # Followed late: the clock jumps with no timer run; the click lists them first.
    now_s = page.evaluate("Date.now()") / 1000
    page.clock.set_system_time(now_s + life_s)
    with (
        page.expect_request(listing),
        page.expect_response(
            lambda r: "page.png" in r.url and "X-Amz-Signature" in r.url
        ) as fetched,
    ):
        download.click()
    assert fetched.value.status == 200


def test_the_jobs_list_read_again_keeps_the_rows_that_did_not_change(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    """The list is read again as jobs change (every second on a busy tenant). A row rebuilt
    between a pointer's press and its release took the click away from its link (seen as a
    click on a job that did not open it): a row that did not change stays the same element."""
    body = {"steps": SCREENSHOT_STEPS, "inputs": {"site": stack.site_url}}
    first = client.wait(client.submit(body).job_id, timeout=SHOWN_MS / 1000)
    page = signed_in
    page.goto(f"{stack.console_url}#/jobs")
    link = page.locator(f"tr[data-job-id='{first.job_id}'] a")
    expect(link).to_be_visible()
    # A new job's row comes only with the page read again: once so the view is settled (its
    # first reads and its subscription's), then with the row's element in hand.
    settled = client.submit(body).job_id
    expect(page.locator(f"tr[data-job-id='{settled}']")).to_be_visible()
    shown = link.element_handle()
    second = client.submit(body).job_id
    expect(page.locator(f"tr[data-job-id='{second}']")).to_be_visible()
    assert shown.evaluate("element => element.isConnected")
    shown.click()
    expect(page).to_have_url(re.compile(first.job_id))
    for job_id in (settled, second):
        client.wait(job_id, timeout=SHOWN_MS / 1000)


def test_a_running_job_updates_its_status_and_log_without_a_reload(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    page = signed_in
    job = client.submit({"steps": slow_steps(4), "inputs": {"site": stack.site_url}})
    page.goto(f"{stack.console_url}#/jobs/{job.job_id}")
    page.evaluate("window.__notReloaded = true")
    expect(page.locator("#job-status")).to_have_text("running")
    expect(page.locator("#job-log li.log-step_finished").first).to_be_visible()
    expect(page.locator("#job-status")).to_have_text("succeeded")
    expect(page.locator("#job-log li.log-state").last).to_contain_text("succeeded")
    assert page.evaluate("window.__notReloaded") is True


def test_cancel_stops_a_running_job_and_run_again_submits_it_anew(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    page = signed_in
    job = client.submit({"steps": slow_steps(50), "inputs": {"site": stack.site_url}})
    page.goto(f"{stack.console_url}#/jobs/{job.job_id}")
    expect(page.locator("#job-status")).to_have_text("running")
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#job-status")).to_have_text("cancelled")
    assert client.get(job.job_id).status.value == "cancelled"

    page.get_by_role("button", name="Run again").click()
    expect(page).not_to_have_url(re.compile(job.job_id))
    again = page.url.rsplit("/", 1)[-1]
    expect(page.locator("h1")).to_contain_text(again)
    assert client.get(again).request["steps"] == client.get(job.job_id).request["steps"]
    client.cancel(again)


def test_a_job_that_needs_review_is_found_by_its_filter_and_resolved_on_its_page(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    from devstack.examples import EXAMPLES_DIR, load_example

    assert stack.site is not None
    body = load_example(EXAMPLES_DIR / "place-order.json", stack.site_url)
    del body["steps"][4]["check"]  # nothing can tell whether the order went through
    stack.site.orders.set(drop=True)  # recorded, never answered
    try:
        job = client.wait(client.submit(body).job_id, timeout=SHOWN_MS / 1000 * 3)
    finally:
        stack.site.orders.set(drop=False)
    assert job.status.value == "needs_review", job.error
    page = signed_in
    page.goto(f"{stack.console_url}#/jobs")
    page.locator("#filter-review").click()
    row = page.locator(f"tr[data-job-id='{job.job_id}']")
    expect(row).to_contain_text("needs review")
    row.get_by_role("link").click()
    expect(page.locator("#checkpoints tr[data-step='4']")).to_contain_text("Place order")
    expect(page.locator("#review")).to_contain_text("Did step 4 (Place order) take effect?")
    assert serious_violations(page) == []
    page.get_by_role("button", name="Done: it happened").click()
    expect(page.locator("#job-status")).to_have_text("succeeded")
    resolved = client.get(job.job_id)
    assert resolved.resolution is not None and resolved.resolution.outcome == "done"
    assert len(stack.site.orders.of(job.job_id)) == 1


def test_a_job_resolved_not_done_on_its_page_runs_again_from_the_start(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    from devstack.examples import EXAMPLES_DIR, load_example

    assert stack.site is not None
    body = load_example(EXAMPLES_DIR / "place-order.json", stack.site_url)
    del body["steps"][4]["check"]
    # Recorded, never answered; the shop refuses a second order with the same reference, so
    # a reviewer's wrong "not done" costs nothing here (it is the site's own guard).
    stack.site.orders.set(drop=True, dedupe=True)
    try:
        job = client.wait(client.submit(body).job_id, timeout=SHOWN_MS / 1000 * 3)
        assert job.status.value == "needs_review", job.error
    finally:
        stack.site.orders.set(drop=False)
    try:
        page = signed_in
        page.goto(f"{stack.console_url}#/jobs/{job.job_id}")
        expect(page.locator("#review")).to_contain_text("Did step 4 (Place order) take effect?")
        page.get_by_role("button", name="Not done: run it again").click()
        expect(page.locator("#job-status")).to_have_text("succeeded")
    finally:
        stack.site.orders.set(dedupe=False)
    again = client.get(job.job_id)
    assert again.resolution is not None and again.resolution.outcome == "not_done"
    assert again.attempt == 2  # the workflow ran again, from its first step
    assert len(stack.site.orders.of(job.job_id)) == 1


def test_a_failed_jobs_page_shows_its_failure_screenshot_trace_and_har_and_replays_it(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    job = client.submit(
        {
            "steps": [
                {"action": "goto", "url": stack.site_url},
                {"action": "click", "selector": "#no-such-button"},
            ],
            "options": {
                "action_timeout_ms": 500,
                "har": "on_failure",
                "trace": "retain-on-failure",
            },
            "max_attempts": 1,
        }
    )
    client.wait(job.job_id, timeout=SHOWN_MS / 1000)
    signed_in.goto(f"{stack.console_url}#/jobs/{job.job_id}")
    expect(signed_in.locator("#job-status")).to_have_text("failed")
    expect(signed_in.locator(".job-error")).to_contain_text("#no-such-button")
    failure = signed_in.locator('.shots img[alt*="failure.png"]')
    expect(failure).to_be_visible()
    signed_in.wait_for_function(
        "img => img.complete && img.naturalWidth > 0", arg=failure.element_handle()
    )
    expect(signed_in.get_by_role("cell", name=re.compile(r"trace\.zip$")).first).to_be_visible()
    expect(signed_in.locator(".trace-help")).to_contain_text("playwright show-trace")
    expect(signed_in.locator("#har-link")).to_have_attribute("href", re.compile(r"har\.zip"))
    # Each step's share of the job's price, next to its time.
    expect(signed_in.locator(".step-cost").first).to_have_text(re.compile(r"^\$0\.\d{7}$"))
    assert serious_violations(signed_in) == []
    # Replayed offline from its page: the replay's page links back to it.
    signed_in.get_by_role("button", name="Replay offline").click()
    expect(signed_in.locator("#replay-of")).to_contain_text(job.job_id)
    expect(signed_in.locator("#job-status")).to_have_text("failed")


def test_an_invalid_workflow_shows_the_error_next_to_its_field(signed_in: Page) -> None:
    page = signed_in
    page.get_by_role("link", name="Submit", exact=True).click()
    steps = page.get_by_label("Steps (JSON)")
    steps.fill('[{"action": "goto", "wait_until": "load"}]')
    error = page.locator("#submit-steps-error")
    expect(error).to_contain_text("steps[0]")
    expect(steps).to_have_attribute("aria-invalid", "true")
    assert serious_violations(page) == []  # with the error shown
    steps.fill('[{"action": "goto", "url": "http://127.0.0.1:9/"}]')
    expect(error).to_be_empty()
    expect(page.locator("#submit-verdict")).to_have_text("Looks valid.")
    # Issue 38's shapes: a bad option is named next to the options, the good ones are valid.
    options = page.get_by_label("Options (JSON object)")
    options.fill('{"har": "sometimes"}')
    expect(page.locator("#submit-options-error")).to_contain_text("options.har")
    options.fill(
        '{"har": "on_failure", "dialogs": "accept", "block": {"resource_types": ["image"]}}'
    )
    steps.fill(
        json.dumps(
            [
                {"action": "route", "url": "**/api/*", "fulfill": {"body": "{}"}},
                {"action": "goto", "url": "http://127.0.0.1:9/"},
                {"action": "dialog", "type": "beforeunload"},
                {"action": "drag", "selector": "#a", "target": "#b"},
                {"action": "use_session", "name": "acme", "required": False},
            ]
        )
    )
    expect(page.locator("#submit-options-error")).to_be_empty()
    expect(page.locator("#submit-verdict")).to_have_text("Looks valid.")


def test_the_editor_submits_an_irreversible_step_its_compensation_and_idempotency_key(
    signed_in: Page, client: PagefleetClient
) -> None:
    page = signed_in
    page.get_by_role("link", name="Submit", exact=True).click()
    place = {"action": "click", "selector": "#place", "irreversible": True, "label": "Place"}
    page.get_by_label("Steps (JSON)").fill(
        json.dumps(
            [
                {"action": "goto", "url": "http://127.0.0.1:9/order"},
                {"action": "fill", "selector": "#ref", "value": "{{job.idempotency_key}}"},
                place,
            ]
        )
    )
    verdict = page.locator("#submit-verdict")
    # Without a key, {{job.idempotency_key}} is refused (next to the steps or above the form).
    shown = page.locator("#submit-messages, #submit-steps-error")
    expect(shown.filter(has_text="Idempotency-Key")).to_have_count(1)
    page.get_by_label("Idempotency-Key (optional)").fill("order-77")
    compensate = page.get_by_label("Compensate (JSON, optional)")
    compensate.fill('[{"action": "click"}]')
    expect(page.locator("#submit-compensate-error")).to_contain_text("compensate[0]")
    compensate.fill('[{"action": "goto", "url": "http://127.0.0.1:9/orders/cancel"}]')
    expect(verdict).to_have_text("Looks valid.")
    page.get_by_role("button", name="Submit", exact=True).click()

    expect(page.locator("#job-status")).to_be_visible()
    job_id = page.url.rsplit("/", 1)[-1]
    job = client.get(job_id)
    assert job.request["steps"][2]["irreversible"] is True
    assert job.request["compensate"][0]["url"] == "http://127.0.0.1:9/orders/cancel"
    # Sent with the key: the key now belongs to that job.
    with pytest.raises(ApiError) as reused:
        client.submit({"steps": [place]}, idempotency_key="order-77")
    assert reused.value.status == 409 and "Idempotency-Key" in str(reused.value)
    with contextlib.suppress(ApiError):  # it may have failed already (nothing on port 9)
        client.cancel(job_id)


def test_another_tenants_job_reads_as_not_found(signed_in: Page, stack: LocalStack) -> None:
    other_key = stack.create_tenant_key("console-other")
    with stack.client(other_key) as other:
        theirs = other.submit({"steps": [{"action": "goto", "url": stack.site_url}]})
    signed_in.goto(f"{stack.console_url}#/jobs/{theirs.job_id}")
    expect(signed_in.get_by_role("heading", name="Job not found")).to_be_visible()
    expect(signed_in.get_by_text(theirs.job_id)).to_be_visible()
    expect(signed_in.locator("#job-status")).to_have_count(0)


def test_the_fleet_view_shows_the_apis_figures(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    finished = client.submit({"steps": SCREENSHOT_STEPS, "inputs": {"site": stack.site_url}})
    client.wait(finished.job_id, timeout=SHOWN_MS / 1000)
    for job in client.list(limit=100).jobs:  # nothing moves while the figures are read
        if not job.is_final:
            client.wait(job.job_id, timeout=SHOWN_MS / 1000)
    stats = client.stats()
    printed = CliRunner().invoke(
        cli.app,
        ["stats", "--json"],
        env={"PAGEFLEET_API_URL": stack.api_url, "PAGEFLEET_API_KEY": stack.dev_api_key or ""},
    )
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.output) == stats.model_dump(
        mode="json"
    )  # what `pagefleet stats` shows
    signed_in.get_by_role("link", name="Fleet", exact=True).click()
    expect(signed_in.locator("#fleet-success")).to_be_visible()
    expected = {
        "fleet-queued": stats.counts.get("queued", 0),
        "fleet-running": stats.counts.get("running", 0),
        "fleet-success": stats.success_rate,
        "fleet-failure": stats.failure_rate,
        "fleet-retry": stats.retry_rate,
        "fleet-duration-p50": stats.duration_s.p50,
        "fleet-duration-p99": stats.duration_s.p99,
        "fleet-delay-p95": stats.queue_delay_s.p95,
    }
    shown = {k: signed_in.locator(f"#{k}").get_attribute("data-value") for k in expected}
    assert {k: float(v) if v else None for k, v in shown.items()} == pytest.approx(expected)


def test_two_workflow_versions_are_compared(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    first = {"steps": [{"action": "goto", "url": "{{inputs.site}}"}], "inputs": {"site": "x"}}
    client.put_workflow("console-diff", first)
    second = {**first, "steps": [*first["steps"], {"action": "screenshot", "name": "b.png"}]}
    client.put_workflow("console-diff", second)
    signed_in.goto(f"{stack.console_url}#/workflows/console-diff")
    diff = signed_in.locator("#workflow-diff")
    expect(diff.locator(".diff-added").filter(has_text='"b.png"')).to_be_visible()
    expect(diff).to_contain_text("console-diff@1")
    assert serious_violations(signed_in) == []


def test_a_schedule_is_paused_and_resumed(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    made = client.create_schedule(
        {
            "name": "console-pause",
            "expression": "rate(1 day)",
            "job": {"steps": [{"action": "goto", "url": stack.site_url}]},
        }
    )
    signed_in.goto(f"{stack.console_url}#/schedules")
    row = signed_in.locator(f'tr[data-schedule-id="{made.schedule_id}"]')
    row.get_by_role("button", name="Pause console-pause").click()
    expect(row.get_by_role("cell", name="paused", exact=True)).to_be_visible()
    assert client.schedule(made.schedule_id).enabled is False
    row.get_by_role("button", name="Resume console-pause").click()
    expect(row.get_by_role("cell", name="active", exact=True)).to_be_visible()
    assert client.schedule(made.schedule_id).enabled is True
    client.delete_schedule(made.schedule_id)


VIEWS = ["jobs", "submit", "session", "workflows", "schedules", "usage", "fleet"]


def test_no_view_breaks_a_script_or_the_policy(page: Page, stack: LocalStack) -> None:
    """Every view loads with no uncaught error and nothing the Content-Security-Policy
    refused (inline code or styles, another origin): what would break on CloudFront too."""
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    page.on(
        "console",
        lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None,
    )
    assert stack.dev_api_key is not None
    sign_in(page, stack.console_url, stack.dev_api_key)
    for view in VIEWS:
        page.goto(f"{stack.console_url}#/{view}")
        expect(page.locator("main h1")).to_be_visible()
        page.wait_for_load_state("networkidle")
    assert problems == []


@pytest.mark.parametrize("view", VIEWS)
def test_no_serious_accessibility_violations(
    signed_in: Page, stack: LocalStack, client: PagefleetClient, view: str
) -> None:
    signed_in.goto(f"{stack.console_url}#/{view}")
    expect(signed_in.locator("main h1")).to_be_visible()
    signed_in.wait_for_load_state("networkidle")
    assert serious_violations(signed_in) == []


def test_no_serious_accessibility_violations_on_sign_in_and_a_job(
    page: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    page.goto(stack.console_url)
    expect(page.get_by_label("API key")).to_be_visible()
    assert serious_violations(page) == []
    job = client.submit({"steps": SCREENSHOT_STEPS, "inputs": {"site": stack.site_url}})
    client.wait(job.job_id, timeout=SHOWN_MS / 1000)
    assert stack.dev_api_key is not None
    sign_in(page, stack.console_url, stack.dev_api_key)
    page.goto(f"{stack.console_url}#/jobs/{job.job_id}")
    expect(page.locator(".shots img").first).to_be_visible()
    assert serious_violations(page) == []


def test_a_monitors_runs_carry_change_badges_and_a_run_shows_its_diff(
    signed_in: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    spec = watcher_spec(stack.site_url, name="console-watch")
    spec["job"].pop("notify")
    sid = client.create_schedule(spec).schedule_id
    set_shop(stack.site_url, None)
    first = run_now(client, sid)
    set_shop(stack.site_url, "state-price-drop.json", button_left=400)
    second = run_now(client, sid)

    page = signed_in
    page.goto(f"{stack.console_url}#/schedules")
    page.get_by_role("link", name="console-watch", exact=True).click()
    expect(page.locator("#schedule-health")).to_have_text("ok")
    runs = page.locator("tr[data-job-id]")
    expect(runs).to_have_count(2)
    newest = page.locator(f'tr[data-job-id="{second.job_id}"]')
    expect(newest.locator("[data-change]")).to_have_text(re.compile(r"^changed \+1 -0 ~1"))
    oldest = page.locator(f'tr[data-job-id="{first.job_id}"]')
    expect(oldest.locator("[data-change]")).to_have_text("no baseline")
    assert serious_violations(page) == []

    newest.get_by_role("link", name=second.job_id).click()
    table = page.locator("table.changes")
    added = table.locator('tr[data-change="added"]')
    expect(added).to_have_count(1)
    expect(added).to_contain_text("CMP-4")
    changed = table.locator('tr[data-change="changed"]')
    expect(changed).to_have_count(1)
    expect(changed.locator("td")).to_have_text(
        ["products", "changed", "LAN-2", "price", "18.50", "15.90"]
    )
    diff = page.locator("#visual-diff")
    expect(diff).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=diff.element_handle())
    assert serious_violations(page) == []

    # Pinning the first run as the baseline, from the schedule's page.
    page.goto(f"{stack.console_url}#/schedules/{sid}")
    oldest.get_by_role("button", name=f"Pin as baseline {first.job_id}").click()
    expect(oldest.get_by_role("cell", name="baseline", exact=True)).to_be_visible()
    assert client.schedule(sid).baseline_job_id == first.job_id
