"""What the platform adds to a browser session's step: the step through the API, and alone.

    .venv/bin/python bench/session_overhead.py [--steps 40] [--rounds 3]

Starts the local stack (moto with its IAM check, the gateway invoking the real API handler,
one worker in Chromium, the demo site on 127.0.0.1) and opens a browser session on the
demo's contact form. Round by round, interleaved:

- *through the platform*: ``POST /v1/browser-sessions/{id}/steps`` with one ``fill`` step
  and no ARIA snapshot, timed at the client (the API records the command while it wakes
  the worker through its inbox, the worker claims it while it reads the takeover lock, runs
  the step with its URL and title and records the answer, the API reads it, back);
- *alone*: the same ``fill`` on the same page in a Chromium this process drives directly.

Prints the p50 (and p90) of each side by side, their difference (what the platform adds;
the target, issue 32, is 25 ms at p50) and their ratio.

``--count`` measures what does not depend on a quiet machine instead: the runtimes (the API
function and the worker) load ``bench/request_hook``, and the bench prints, per step through
the platform, the AWS requests each makes and the calls the worker's Playwright client makes
to its driver (each a round trip to Chromium's side), by operation and by the function of
ours that made it, with their summed time.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.common import Measured  # noqa: E402

if TYPE_CHECKING:
    from bench.aws_requests import Call
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
    parser.add_argument(
        "--count", action="store_true", help="count each step's AWS requests and Chromium calls"
    )
    args = parser.parse_args(argv)
    if args.count:
        return count(args.steps)

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


def count(steps: int) -> int:
    """Each step's AWS requests and Playwright calls, per runtime, by operation and caller."""
    import collections
    import tempfile

    from bench.aws_requests import calls_between, hook_env
    from devstack.stack import LocalStack

    log_dir = Path(tempfile.mkdtemp(prefix="pagefleet-session-calls-"))
    env = {**hook_env(log_dir), "PAGEFLEET_BENCH_PLAYWRIGHT": "1"}
    with (
        LocalStack(
            api_port=0,
            workers=1,
            concurrency=1,
            sweeper_interval_s=3600,
            worker_env=env,
            lambda_env=env,
        ) as stack,
        stack.client() as client,
    ):
        sid = client.open_session(idle_timeout_s=600).session_id
        opened = client.session_steps(
            sid, {"action": "goto", "url": f"{stack.site_url}/contact.html"}
        )
        assert opened.ok, opened.error
        for _ in range(3):
            client.session_steps(sid, FILL, aria=False)
        time.sleep(1.0)
        start = time.time()
        for _ in range(steps):
            assert client.session_steps(sid, FILL, aria=False).ok
        end = time.time()
        client.close_session(sid)
    found = calls_between(log_dir, start, end)
    calls: collections.Counter[tuple[str, str, str]] = collections.Counter()
    spent: dict[tuple[str, str, str], float] = collections.defaultdict(float)
    for _began, ms, who, operation, caller in found:
        calls[(who, operation, caller)] += 1
        spent[(who, operation, caller)] += ms
    _print_path(found)
    print(f"per step ({steps} steps through the platform): calls, ms spent in them")
    for who in sorted({k[0] for k in calls}):
        mine = {k: n for k, n in calls.items() if k[0] == who}
        total_ms = sum(spent[k] for k in mine) / steps
        print(f"  {who}: {sum(mine.values()) / steps:.2f} calls, {total_ms:.1f} ms")
        for key, n in sorted(mine.items(), key=lambda kv: -spent[kv[0]]):
            print(f"      {n / steps:5.2f} {spent[key] / steps:6.1f} ms  {key[1]} <- {key[2]}")
    return 0


def _print_path(found: list[Call]) -> None:
    """The step of median length, call by call: what runs one after the other on its path
    (a step: from the API's record of it to the last read of its answer)."""
    from bench.aws_requests import print_calls

    firsts = [_step_start(found, i) for i, c in enumerate(found) if _api(c, "dynamodb.PutItem")]
    steps = [found[a:b] for a, b in itertools.pairwise(firsts)]
    if not steps:
        return

    def length(step: list[Call]) -> float:
        api = [c for c in step if "api" in c[2]]
        return api[-1][0] + api[-1][1] / 1000 - step[0][0]

    step = sorted(steps, key=length)[len(steps) // 2]
    print(f"the median step's calls ({length(step) * 1000:.1f} ms, first request to last read):")
    print_calls(step, step[0].began)


def _api(call: Call, operation: str) -> bool:
    return call[3] == operation and "api" in call[2]


def _step_start(found: list[Call], put: int) -> int:
    """Where the step whose record is ``found[put]`` begins: at its wake-up when that was
    sent alongside the record (started on its own thread a moment before the record)."""
    for index in range(put - 1, max(-1, put - 4), -1):
        call = found[index]
        if _api(call, "sqs.SendMessage") and found[put][0] - call[0] < 0.005:
            return index
    return put


if __name__ == "__main__":
    with Measured("bench/session_overhead.py"):
        code = main()
    sys.exit(code)
