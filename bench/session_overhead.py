"""What the platform adds to a browser session's step: the step through the API, and alone.

    .venv/bin/python bench/session_overhead.py [--steps 40] [--rounds 3]

Starts the local stack (moto with its IAM check, the gateway invoking the real API handler,
one worker in Chromium, the demo site on 127.0.0.1) and opens a browser session on the
demo's contact form. Round by round, interleaved:

- *through the platform*: ``POST /v1/browser-sessions/{id}/steps`` with one ``fill`` step
  and no ARIA snapshot, timed at the client (the API records the command and wakes the
  worker through its inbox, the worker claims it, runs the step with its URL and title and
  records the answer, the API reads it, back);
- *alone*: the same ``fill`` on the same page in a Chromium this process drives directly.

Prints the p50 (and p90) of each side by side, their difference (what the platform adds;
the target, issue 32, is 25 ms at p50) and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.common import Measured  # noqa: E402

if TYPE_CHECKING:
    from pagefleet.specs.settings import WorkerSettings

FILL = {"action": "fill", "selector": "#name", "value": "Ada Lovelace"}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _alone(site: str, steps: int, settings: WorkerSettings) -> list[float]:
    """The step in a Chromium launched as the worker launches it."""
    from playwright.async_api import async_playwright

    from browser_task.browser.chromium import chromium_args, chromium_executable

    timings: list[float] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=chromium_executable(settings, p),
            args=chromium_args(settings),
            headless=True,
        )
        page = await browser.new_page()
        await page.goto(f"{site}/contact.html")
        for _ in range(steps):
            started = time.perf_counter()
            await page.locator(FILL["selector"]).fill(FILL["value"])
            timings.append((time.perf_counter() - started) * 1000)
        await browser.close()
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="steps per side per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    from devstack.stack import LocalStack

    platform: list[float] = []
    alone: list[float] = []
    with LocalStack(api_port=0, workers=1, concurrency=1) as stack, stack.client() as client:
        assert stack.worker_settings is not None
        settings = stack.worker_settings
        sid = client.open_session(idle_timeout_s=600).session_id
        opened = client.session_steps(
            sid, {"action": "goto", "url": f"{stack.site_url}/contact.html"}
        )
        assert opened.ok, opened.error
        for _ in range(3):  # warm: the API's imports, the worker's first commands
            client.session_steps(sid, FILL, aria=False)
        for _ in range(args.rounds):
            for _ in range(args.steps):
                started = time.perf_counter()
                answer = client.session_steps(sid, FILL, aria=False)
                platform.append((time.perf_counter() - started) * 1000)
                assert answer.ok, answer.error
            alone.extend(asyncio.run(_alone(stack.site_url, args.steps, settings)))
        client.close_session(sid)

    p50_platform, p50_alone = statistics.median(platform), statistics.median(alone)
    print(
        f"session step p50: platform {p50_platform:.1f} ms, alone {p50_alone:.1f} ms, "
        f"added {p50_platform - p50_alone:.1f} ms, ratio {p50_platform / p50_alone:.1f}x "
        f"(p90 {_pct(platform, 0.9):.1f} vs {_pct(alone, 0.9):.1f} ms; "
        f"{len(platform)} steps each side)"
    )
    return 0


if __name__ == "__main__":
    with Measured("bench/session_overhead.py"):
        code = main()
    sys.exit(code)
