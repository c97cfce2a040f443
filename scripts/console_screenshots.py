"""Pictures of the web console for the README: each view, rendered from a local stack.

    .venv/bin/python scripts/console_screenshots.py            # writes docs/img/console-*.png

It starts a local stack, runs the examples, stores a workflow in two versions, a schedule
and the example price watcher with two runs (so those views have something to show), signs
in as the dev tenant and saves one PNG per view.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from devstack.console_browser import VIEWPORT, console_browser, sign_in
from devstack.examples import run_examples
from devstack.stack import LocalStack

REPO = Path(__file__).resolve().parents[1]
MONITORS = REPO / "examples" / "monitors"
SHOWN_MS = 60_000


def seed(stack: LocalStack) -> str:
    """Example jobs, a workflow with two versions and a schedule; the id of a job to show."""
    with stack.client() as client:
        results = run_examples(client, stack.site_url)
        definition: dict[str, Any] = json.loads(
            (REPO / "examples" / "dispatch" / "titles.workflow.json").read_text()
        )
        definition["inputs"] = {"site": stack.site_url}
        client.put_workflow("titles", definition)
        definition["steps"].append({"action": "screenshot", "name": "shop.png"})
        client.put_workflow("titles", definition)
        client.create_schedule(
            {
                "name": "nightly",
                "expression": "cron(30 2 * * ? *)",
                "timezone": "Asia/Kolkata",
                "overlap": "skip",
                "job": {"workflow": "titles", "inputs": {"site": stack.site_url}},
            }
        )
        shown = next(r.job for r in results if r.job and r.name == "extract-products")
        assert shown is not None
        return shown.job_id


def seed_monitor(stack: LocalStack) -> tuple[str, str]:
    """The example price watcher, run twice with a price dropped and a product added in
    between: (its schedule id, the run that found the change)."""
    spec: dict[str, Any] = json.loads((MONITORS / "price-watcher.schedule.json").read_text())
    spec["job"]["inputs"]["site"] = stack.site_url
    spec["enabled"] = False  # only the runs started here
    with stack.client() as client, httpx.Client(base_url=stack.site_url, trust_env=False) as site:
        schedule_id = client.create_schedule(spec).schedule_id
        site.post("/watch/reset").raise_for_status()
        for state in (None, "state-price-drop.json"):
            if state:
                site.put("/watch/state", content=(MONITORS / state).read_bytes()).raise_for_status()
            run = client.wait(client.run_schedule(schedule_id).job_id, timeout=180)
            deadline = time.monotonic() + 60  # counted into the schedule a moment after
            while client.schedule(schedule_id).last_success_job_id != run.job_id:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"run {run.job_id} ended {run.status}, never counted")
                time.sleep(0.25)
        return schedule_id, run.job_id


def shoot(page: Page, out: Path, name: str) -> None:
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(out / f"console-{name}.png"), full_page=False)
    print(f"wrote {out / f'console-{name}.png'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    with LocalStack(api_port=0, workers=1, concurrency=2) as stack, console_browser() as browser:
        job_id = seed(stack)
        page = browser.new_context(viewport=VIEWPORT).new_page()  # type: ignore[arg-type]
        page.set_default_timeout(SHOWN_MS)
        page.goto(stack.console_url)
        expect(page.get_by_label("API key")).to_be_visible()
        shoot(page, args.out, "sign-in")
        assert stack.dev_api_key is not None
        sign_in(page, stack.console_url, stack.dev_api_key)
        expect(page.locator("table.jobs tbody tr").nth(5)).to_be_visible()
        shoot(page, args.out, "jobs")
        page.goto(f"{stack.console_url}#/jobs/{job_id}")
        page.wait_for_function("() => [...document.images].some(i => i.naturalWidth > 0)")
        page.screenshot(path=str(args.out / "console-job.png"), full_page=True)
        print(f"wrote {args.out / 'console-job.png'}")
        page.goto(f"{stack.console_url}#/submit")
        page.get_by_label("Steps (JSON)").fill('[{"action": "goto", "wait_until": "load"}]')
        expect(page.locator("#submit-steps-error")).not_to_be_empty()
        shoot(page, args.out, "submit")
        page.goto(f"{stack.console_url}#/workflows/titles")
        expect(page.locator("#workflow-diff")).to_be_visible()
        shoot(page, args.out, "workflows")
        monitor, changed = seed_monitor(stack)
        page.goto(f"{stack.console_url}#/schedules/{monitor}")
        expect(page.locator("#schedule-health")).to_be_visible()
        shoot(page, args.out, "schedule")
        page.goto(f"{stack.console_url}#/jobs/{changed}")
        expect(page.locator("#changes")).to_be_visible()
        page.locator("#changes").scroll_into_view_if_needed()
        shoot(page, args.out, "changes")
        for view in ("schedules", "usage", "fleet"):
            page.goto(f"{stack.console_url}#/{view}")
            expect(page.locator("main h1")).to_be_visible()
            expect(page.locator("main table").first).to_be_visible()
            shoot(page, args.out, view)
    stack.cleanup_logs()


if __name__ == "__main__":
    main()
