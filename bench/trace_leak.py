"""What an always-on trace leaves behind: contexts closed with their trace running, against
the worker's ``TraceRecorder``, side by side in one run.

    .venv/bin/python bench/trace_leak.py [--jobs 1000] [--every 200]

Each side runs the same small job ``--jobs`` times in a fresh context of its own Chromium
and Playwright driver: start the always-on trace (as browser_task.browser.tracing does), open a
page, read it ten times, close. The ``close only`` side starts the recording itself and
closes the context with it still running, as the worker did until 2026-12-01; the
``worker`` side records through ``TraceRecorder`` and drops the recording before the
close, as the worker does now with a trace it does not keep. Every ``--every`` jobs it prints the
driver's RSS, its CPU a job, the milliseconds a job and the ``playwright-tracing-*``
directories left in the driver's temporary directory (a private one per side). Nothing is
asserted; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from playwright.async_api import async_playwright

from bench.common import Measured
from browser_task.browser.chromium import (
    chromium_args,
    chromium_executable,
    driver_env,
    environment,
    sandbox_enabled,
)
from browser_task.browser.tracing import TracePlan, TraceRecorder
from pagefleet.specs.settings import WorkerSettings

# Recorded, dropped unless the job fails (retain-on-failure): what a successful job's trace
# goes through.
FOR_FAILURES = TracePlan("retain-on-failure", on_success=False, on_failure=True)

PAGE = "<ul>" + "".join(f"<li>item {n}</li>" for n in range(20)) + "</ul>"
SIDES = ("close only", "worker")


async def side(name: str, jobs: int, every: int) -> list[tuple[int, float, float, float, int]]:
    """(jobs so far, driver RSS MB, driver CPU ms a job, ms a job, directories left) rows."""
    settings = WorkerSettings(
        jobs_table="-", tenants_table="-", artifacts_bucket="-", queue_urls={"standard": "-"}
    )
    # Short: Chromium puts a Unix socket under the driver's temporary directory.
    tmp = Path(tempfile.mkdtemp(prefix="pf-leak-", dir="/tmp"))
    rows: list[tuple[int, float, float, float, int]] = []
    try:
        with environment({**driver_env(), "TMPDIR": str(tmp)}):
            pw = await async_playwright().start()
        driver = next(p for p in psutil.Process().children() if "node" in p.name())
        browser = await pw.chromium.launch(
            executable_path=chromium_executable(settings, pw),
            headless=True,
            args=chromium_args(settings),
            chromium_sandbox=sandbox_enabled(settings),
        )
        started, cpu = time.perf_counter(), driver.cpu_times()
        for done in range(1, jobs + 1):
            context = await browser.new_context()
            if name == "worker":
                trace = TraceRecorder(context, FOR_FAILURES)
                await trace.start()
            else:  # the recording as TraceRecorder starts it, without the recorder
                await context.tracing.start(screenshots=False, snapshots=True, sources=False)
            page = await context.new_page()
            await page.set_content(PAGE)
            for _ in range(10):
                await page.locator("li").first.text_content()
            if name == "worker":
                await trace.discard()  # what ``finish`` does with a trace it does not keep
            await context.close()
            if done % every == 0:
                now, cpu_now = time.perf_counter(), driver.cpu_times()
                used = cpu_now.user + cpu_now.system - cpu.user - cpu.system
                rows.append(
                    (
                        done,
                        driver.memory_info().rss / 2**20,
                        used * 1000 / every,
                        (now - started) * 1000 / every,
                        len(list(tmp.glob("playwright-tracing-*"))),
                    )
                )
                print(f"  {name}: {done} jobs", file=sys.stderr, flush=True)
                started, cpu = now, cpu_now
        await browser.close()
        await pw.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--every", type=int, default=200)
    args = parser.parse_args(argv)
    results = {name: asyncio.run(side(name, args.jobs, args.every)) for name in SIDES}
    print(
        f"{'side':11} {'jobs':>5} {'driver RSS MB':>14} {'driver CPU ms/job':>18} "
        f"{'ms/job':>7} {'dirs left':>10}"
    )
    for name, rows in results.items():
        for done, rss, cpu, wall, left in rows:
            print(f"{name:11} {done:5d} {rss:14.0f} {cpu:18.1f} {wall:7.1f} {left:10d}")
    last = {name: rows[-1] for name, rows in results.items() if rows}
    if len(last) == len(SIDES):
        leaky, ours = last["close only"], last["worker"]
        print(
            f"after {leaky[0]} jobs: driver RSS close only / worker = {leaky[1] / ours[1]:.2f}, "
            f"directories left {leaky[4]} / {ours[4]}"
        )
    return 0


if __name__ == "__main__":
    with Measured("bench/trace_leak.py"):
        code = main()
    sys.exit(code)
