"""How fast a browser session starts: open -> first goto answered -> close, in a row.

    .venv/bin/python bench/session_start.py [--sessions 10]

Starts the local stack (moto with its IAM check and its strict SQS, the gateway invoking
the real API handler, one worker in Chromium, the demo site on 127.0.0.1), opens and closes
one session to warm it (the API's imports, the worker's browser), then, one after the
other, ``--sessions`` times and timed at the client through the Python client:

- ``POST /v1/browser-sessions``;
- the first step, a ``goto`` of the demo's home page, until its answer (the client's path:
  the call, and after a 202 while the session starts, reads of the command);
- ``DELETE /v1/browser-sessions/{id}``.

Between sessions (not timed) it waits until the closed one has given its running slot back,
then ``--pause-s`` (0.5 s by default: an agent's next session does not open the instant its
last one closed, and a worker with no job makes the next context ahead in that time,
browser_task.browser.spare; ``--pause-s 0`` opens them back to back). ``--no-spare`` runs
the worker with ``spare_context`` off: the same build without the context made ahead.
Target (issue 32): open -> first goto p50 <= 300 ms on a warm local stack (the anchors'
published lifecycle figures: Kernel 365 ms, Browserbase 578 ms, Steel 972 ms). Prints, last:
``session open -> first goto p50 <A> ms; open -> goto -> close p50 <B> ms``.

``--count``: the runtimes (API, authorizer, worker) log every AWS request and Playwright
call (``bench/request_hook``), and the session of median open -> first goto is printed
call by call: what runs one after the other on that path.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.common import Measured  # noqa: E402

# How long a closed session may take to give its slot back before the bench gives up.
SLOT_BACK_S = 60.0


def one(client: object, site: str, windows: list[tuple[float, float]]) -> tuple[float, float]:
    """(open -> first goto answered, open -> goto -> close) of one session, in ms; its
    open -> first goto window (epoch s) is added to ``windows``."""
    from pagefleet.client import PagefleetClient

    assert isinstance(client, PagefleetClient)
    began = time.time()
    started = time.perf_counter()
    sid = client.open_session(idle_timeout_s=60).session_id
    answer = client.session_steps(sid, {"action": "goto", "url": f"{site}/"}, aria=False)
    first = (time.perf_counter() - started) * 1000
    windows.append((began, time.time()))
    assert answer.ok, answer.error
    client.close_session(sid)
    whole = (time.perf_counter() - started) * 1000
    give_up = time.monotonic() + SLOT_BACK_S
    while client.get_session(sid).job_status not in ("succeeded", "cancelled", "failed"):
        if time.monotonic() > give_up:
            raise SystemExit(f"session {sid} did not end within {SLOT_BACK_S:.0f} s of its close")
        time.sleep(0.05)
    return first, whole


def main(argv: list[str] | None = None, measured: Measured | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10, help="sessions timed, in a row")
    parser.add_argument(
        "--count", action="store_true", help="print the median session's calls, one by one"
    )
    parser.add_argument(
        "--pause-s", type=float, default=0.5, help="idle time between sessions (not timed)"
    )
    parser.add_argument("--no-spare", action="store_true", help="the worker makes no context ahead")
    args = parser.parse_args(argv)

    from bench.aws_requests import calls_between, hook_env, print_calls
    from devstack.stack import LocalStack

    firsts: list[float] = []
    wholes: list[float] = []
    windows: list[tuple[float, float]] = []
    log_dir = Path(tempfile.mkdtemp(prefix="pagefleet-session-start-"))
    env = {**hook_env(log_dir), "PAGEFLEET_BENCH_PLAYWRIGHT": "1"} if args.count else {}
    worker_env = {**env, "PAGEFLEET_SPARE_CONTEXT": "false"} if args.no_spare else env
    print(f"pause between sessions {args.pause_s} s; context made ahead: {not args.no_spare}")
    with (
        LocalStack(
            api_port=0, workers=1, concurrency=2, worker_env=worker_env, lambda_env=env
        ) as stack,
        stack.client() as client,
    ):
        one(client, stack.site_url, [])  # warm
        for _ in range(args.sessions):
            time.sleep(args.pause_s)
            first, whole = one(client, stack.site_url, windows)
            firsts.append(first)
            wholes.append(whole)
    if measured is not None:
        measured.end()
    if args.count:
        median = sorted(range(len(firsts)), key=firsts.__getitem__)[len(firsts) // 2]
        start, end = windows[median]
        print(f"the median session's open -> first goto ({firsts[median]:.0f} ms), call by call:")
        print_calls(calls_between(log_dir, start, end), start)
    print(
        f"session open -> first goto p50 {statistics.median(firsts):.0f} ms; "
        f"open -> goto -> close p50 {statistics.median(wholes):.0f} ms"
    )
    return 0


if __name__ == "__main__":
    with Measured("bench/session_start.py") as run:
        code = main(measured=run)
    sys.exit(code)
