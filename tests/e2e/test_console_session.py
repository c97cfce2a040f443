"""The console's Live session page in real Chromium against the local stack: open a
session, pick and type steps (checked as they are typed), see the screenshot and the ARIA
snapshot after each, save the steps as a workflow."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from devstack.console_browser import console_browser, sign_in
from devstack.stack import LocalStack
from pagefleet.client import PagefleetClient

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SHOWN_MS = 60_000
expect.set_options(timeout=SHOWN_MS)  # a loaded 2-core machine: the API's first calls


@pytest.fixture(scope="module")
def browser(stack: LocalStack) -> Iterator[Browser]:
    with console_browser() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser, stack: LocalStack) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(SHOWN_MS)
    assert stack.dev_api_key is not None
    sign_in(opened, stack.console_url, stack.dev_api_key)
    yield opened
    context.close()


def type_step(page: Page, step: dict[str, object]) -> None:
    page.get_by_label("Step (JSON)").fill(json.dumps(step))
    expect(page.locator("#session-verdict")).to_have_text("The step is valid.")
    page.get_by_role("button", name="Run step").click()


def test_a_person_builds_a_workflow_step_by_step_and_saves_it(
    page: Page, stack: LocalStack, client: PagefleetClient
) -> None:
    page.get_by_role("link", name="Live session").click()
    page.get_by_role("button", name="Open session").click()
    expect(page.locator("#session-status")).to_contain_text("Session ")
    sid = page.locator("#session-status").get_attribute("data-session")
    assert sid

    # A step the workflow language refuses is named before it runs.
    page.get_by_label("Step (JSON)").fill('{"action": "goto"}')
    expect(page.locator("#session-step-error")).to_contain_text("url")
    expect(page.get_by_role("button", name="Run step")).to_be_enabled()

    type_step(page, {"action": "goto", "url": f"{stack.site_url}/contact.html"})
    expect(page.locator("#session-url")).to_have_text(f"{stack.site_url}/contact.html")
    expect(page.locator("#session-aria")).to_contain_text('textbox "Name"')
    expect(page.locator("#session-screenshot")).to_be_visible()
    loaded = page.locator("#session-screenshot").evaluate("img => img.complete && img.naturalWidth")
    assert loaded

    page.get_by_label("Pick").select_option("fill")  # a template to edit
    assert '"action": "fill"' in page.get_by_label("Step (JSON)").input_value()
    type_step(page, {"action": "fill", "selector": "#name", "value": "Alan Turing"})
    expect(page.locator("#session-history li")).to_have_count(2)
    type_step(page, {"action": "fill", "selector": "#email", "value": "alan@example.com"})
    type_step(page, {"action": "click", "selector": "#send"})
    expect(page.locator("#session-title")).to_have_text("Thank you")

    page.get_by_label("Workflow name").fill("console-contact")
    page.get_by_label("Inputs (JSON object)").fill('{"who": "Alan Turing"}')
    page.get_by_role("button", name="Save as workflow").click()
    expect(page.locator("#session-saved")).to_have_text("console-contact@1")
    page.get_by_role("button", name="Close session").click()

    steps = client.workflow("console-contact").model_dump(mode="json")["definition"]["steps"]
    assert [s["action"] for s in steps] == ["goto", "fill", "fill", "click"]
    assert steps[1]["value"] == "{{inputs.who}}"
