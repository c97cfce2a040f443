"""End-to-end throughput: the whole local stack vs a bare Playwright loop, in one run.

    .venv/bin/python bench/e2e_throughput.py [--jobs 100] [--concurrency 2]

Both sides do the same work per job: open a demo-site page, wait for the list, extract the
product names and links, take a full-page screenshot (and hash it). The bare loop is one
Chromium launched exactly as the worker launches it, a fresh context per job, C asyncio
tasks. The platform run submits every job through the HTTP API first and is timed from the
first submission until every job is final (API, queue, worker, DynamoDB and S3 included).
Both are measured after a warm-up, in alternating segments (bare, platform, platform, bare,
bare, platform, ...; the stack stays up and idle while the bare loop runs), so that machine
load drifting during the run (these machines are shared) weighs on both sides alike.
Target: platform / bare >= 0.8 at concurrency 2.

This prints figures; it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from devstack.stack import LocalStack
from pagefleet.states import FINAL_STATES, JobStatus

TARGET_RATIO = 0.8
console = Console()


def workflow(site: str) -> dict[str, Any]:
    return {
        "name": "bench-extract",
        "inputs": {"site": site},
        "max_attempts": 1,
        "steps": [
            {"action": "goto", "url": "{{inputs.site}}/"},
            {"action": "wait_for", "selector": "#products .product"},
            {"action": "extract", "name": "names", "selector": ".product .name", "many": True},
            {
                "action": "extract",
                "name": "links",
                "selector": ".product a.name",
                "kind": "attribute",
                "attribute": "href",
                "many": True,
            },
            {"action": "screenshot", "name": "page.png", "full_page": True},
        ],
    }


@dataclass
class Run:
    mode: str
    jobs: int
    seconds: float
    succeeded: int
    note: str = ""
    submit_s: float = 0.0  # platform: time spent submitting through the API

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0


# --- baseline: a bare Playwright loop -------------------------------------------------------
async def _bare(site: str, jobs: int, warmup: int, concurrency: int) -> Run:
    from playwright.async_api import async_playwright

    from browser_task.chromium import chromium_args, chromium_executable, sandbox_enabled
    from pagefleet.models import JobOptions
    from pagefleet.settings import WorkerSettings

    settings = WorkerSettings(
        jobs_table="-", tenants_table="-", artifacts_bucket="-", queue_urls={"standard": "-"}
    )
    options = JobOptions()
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=chromium_executable(settings, pw),
            headless=settings.headless,
            args=chromium_args(settings),
            chromium_sandbox=sandbox_enabled(settings),
        )

        async def one() -> bool:
            context = await browser.new_context(
                viewport={"width": options.viewport.width, "height": options.viewport.height},
                accept_downloads=True,
                service_workers="block",
            )
            try:
                page = await context.new_page()
                await page.goto(f"{site}/", wait_until="load")
                await page.locator("#products .product").first.wait_for(state="visible")
                names = await page.locator(".product .name").evaluate_all(
                    "els => els.map(e => (e.textContent || '').trim())"
                )
                await page.locator(".product a.name").evaluate_all(
                    "(els, n) => els.map(e => e.getAttribute(n))", "href"
                )
                shot = await page.screenshot(type="png", full_page=True)
                hashlib.sha256(shot).hexdigest()
                return bool(names)
            finally:
                await context.close()

        async def drain(count: int) -> int:
            remaining = count
            ok = 0

            async def task() -> None:
                nonlocal remaining, ok
                while remaining > 0:
                    remaining -= 1
                    succeeded = await one()
                    ok += succeeded

            await asyncio.gather(*(task() for _ in range(concurrency)))
            return ok

        await drain(warmup)
        start = time.perf_counter()
        ok = await drain(jobs)
        elapsed = time.perf_counter() - start
        await browser.close()
    return Run("bare loop", jobs, elapsed, ok)


# --- the platform ------------------------------------------------------------------------------
def _wait_final(
    stack: LocalStack, job_ids: list[str], timeout_s: float
) -> tuple[dict[JobStatus, int], float | None]:
    """Final status of every job, and the epoch time the last one finished.

    Jobs are read by key, in submission order, about once a second: the finish time comes
    from the records (``finished_at``, written by the worker), so the polling can be slow
    and cost the system being measured next to nothing.
    """
    from devstack.stack import DEV_TENANT
    from pagefleet.runtime import RUNTIME

    assert stack.worker_settings is not None
    store = RUNTIME.job_services(stack.worker_settings).store
    deadline = time.monotonic() + timeout_s
    counts: dict[JobStatus, int] = {}
    last_finish: float | None = None
    for job_id in job_ids:
        while True:
            record = store.get(DEV_TENANT, job_id, consistent=False)
            if record.status in FINAL_STATES or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        counts[record.status] = counts.get(record.status, 0) + 1
        if record.finished_at is not None:
            finished = datetime.fromisoformat(record.finished_at.replace("Z", "+00:00"))
            last_finish = max(last_finish or 0.0, finished.timestamp())
    return counts, last_finish


class Platform:
    """The local stack, kept up between segments; each segment submits and waits."""

    def __init__(self, stack: LocalStack, timeout_s: float) -> None:
        self.stack = stack
        self.timeout_s = timeout_s
        self.body = workflow(stack.site_url)

    def segment(self, jobs: int) -> Run:
        with self.stack.client() as api:
            start = time.time()
            job_ids = [api.submit(self.body).job_id for _ in range(jobs)]
            submitted = time.time() - start
            counts, last_finish = _wait_final(self.stack, job_ids, self.timeout_s)
            elapsed = (last_finish or time.time()) - start
        done = sum(n for status, n in counts.items() if status in FINAL_STATES)
        note = f"TIMED OUT with {done}/{jobs} final" if done < jobs else ""
        run = Run("platform", jobs, elapsed, counts.get(JobStatus.SUCCEEDED, 0), note)
        run.submit_s = submitted
        return run


def _sum(runs: list[Run], note: str) -> Run:
    return Run(
        runs[0].mode,
        sum(r.jobs for r in runs),
        sum(r.seconds for r in runs),
        sum(r.succeeded for r in runs),
        note,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1, help="worker processes (platform)")
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--segments", type=int, default=4, help="alternations of each side")
    parser.add_argument(
        "--timeout", type=float, default=900, help="seconds for each platform segment"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

    console.print(
        f"{args.jobs} jobs, concurrency {args.concurrency}, warm-up {args.warmup}, "
        f"{os.cpu_count()} CPUs"
    )
    # Segments in the order B P P B B P P B ...: a linear drift in machine load weighs on
    # both sides alike.
    segments = max(1, min(args.segments, args.jobs))
    base, extra = divmod(args.jobs, segments)
    sizes = [base + (1 if i < extra else 0) for i in range(segments)]
    bare_runs: list[Run] = []
    platform_runs: list[Run] = []
    with LocalStack(api_port=0, workers=args.workers, concurrency=args.concurrency) as stack:
        platform_side = Platform(stack, args.timeout)
        with console.status("warming up…"):
            platform_side.segment(args.warmup)
        for index, size in enumerate(sizes):
            order = ("bare", "platform") if index % 2 == 0 else ("platform", "bare")
            for side in order:
                with console.status(f"segment {index + 1}/{segments}: {side}…"):
                    if side == "bare":
                        bare_runs.append(
                            asyncio.run(_bare(stack.site_url, size, args.warmup, args.concurrency))
                        )
                    else:
                        platform_runs.append(platform_side.segment(size))
        stack.cleanup_logs()
    bare = _sum(bare_runs, "segments " + " / ".join(f"{r.rate:.2f}" for r in bare_runs))
    platform = _sum(
        platform_runs,
        "segments "
        + " / ".join(f"{r.rate:.2f}" for r in platform_runs)
        + f"; submitting {sum(r.submit_s for r in platform_runs):.1f}s of it"
        + "".join(f"; {r.note}" for r in platform_runs if r.note),
    )

    table = Table("mode", "jobs", "succeeded", "seconds", "jobs/s", "note")
    for run in (bare, platform):
        table.add_row(
            run.mode,
            str(run.jobs),
            str(run.succeeded),
            f"{run.seconds:.2f}",
            f"{run.rate:.2f}",
            run.note,
        )
    console.print(table)
    ratio = platform.rate / bare.rate if bare.rate else 0.0
    verdict = "meets" if ratio >= TARGET_RATIO else "below"
    console.print(f"ratio platform/bare = {ratio:.2f} ({verdict} the {TARGET_RATIO} target)")
    return 0 if platform.succeeded == args.jobs and bare.succeeded == args.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
