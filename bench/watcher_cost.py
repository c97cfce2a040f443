"""What the live view costs a job: its worker's CPU with and without a watcher.

    .venv/bin/python bench/watcher_cost.py [--seconds 20] [--rounds 3]

One local stack (one worker, one slot). Each round runs the same job twice, alternating
which goes first: ``goto`` a page on loopback that repaints all the time (a CSS animation
and a ticking counter, the worst case for a screencast: a frame at every paint), then
``sleep`` for ``--seconds``. One of the two is watched for its whole run by a WebSocket
connection that drains the frames; the other by no one. The worker's CPU (its Python, the
Playwright driver and Chromium, from the kernel) is read when the job starts running and
when it ends. Prints both per round and the last line:
``live view: worker CPU per job <N> ms unwatched, <W> ms watched (+<D> ms, <F> frames)``.
An unwatched job runs no screencast at all, so its figure is the job's own. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from websockets.sync.client import connect

from bench.common import Measured
from devstack.loopback import serve_on_loopback
from devstack.stack import LocalStack

PAGE = b"""<!doctype html><title>busy</title>
<style>@keyframes spin { to { transform: rotate(360deg); } }
#box { width: 200px; height: 200px; background: teal; animation: spin 1s linear infinite; }
</style><div id=box></div><p id=n>0</p>
<script>let n = 0; setInterval(() => { document.getElementById('n').textContent = ++n; }, 100);
</script>"""


class _Busy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: object) -> None:
        return None


def worker_cpu() -> float:
    """CPU seconds so far of the stack's worker processes and everything under them."""
    total = 0.0
    for child in psutil.Process().children():
        try:
            if "browser_task" not in " ".join(child.cmdline()):
                continue
            for process in [child, *child.children(recursive=True)]:
                times = process.cpu_times()
                total += times.user + times.system
        except psutil.Error:
            continue
    return total


def _wait(stack: LocalStack, job_id: str, statuses: set[str]) -> str:
    with stack.client() as api:
        while True:
            status = api.get(job_id).status
            if status in statuses:
                return status
            time.sleep(0.1)


def one_job(stack: LocalStack, url: str, seconds: int, *, watched: bool) -> tuple[float, int]:
    """(the worker's CPU seconds while the job ran, frames its watcher got)."""
    steps = [{"action": "goto", "url": url}, {"action": "sleep", "ms": seconds * 1000}]
    with stack.client() as api:
        job = api.submit({"steps": steps, "max_attempts": 1})
    _wait(stack, job.job_id, {"running"})
    frames = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal frames
        headers = {"Authorization": f"Bearer {stack.dev_api_key}"}
        with connect(stack.live.url, additional_headers=headers, open_timeout=30) as ws:
            ws.send(json.dumps({"action": "watch", "job_id": job.job_id}))
            renewed = time.monotonic()
            while not stop.is_set():
                if time.monotonic() - renewed > 10:
                    ws.send(json.dumps({"action": "watch", "job_id": job.job_id}))
                    renewed = time.monotonic()
                try:
                    message = json.loads(ws.recv(timeout=0.5))
                except TimeoutError:
                    continue
                if message.get("type") == "frame" and message["part"] == message["parts"] - 1:
                    frames += 1

    watcher = threading.Thread(target=watch, daemon=True) if watched else None
    before = worker_cpu()
    if watcher is not None:
        watcher.start()
    _wait(stack, job.job_id, {"succeeded", "failed", "cancelled", "dead_lettered"})
    spent = worker_cpu() - before
    stop.set()
    if watcher is not None:
        watcher.join(10)
    return spent, frames


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20, help="how long each job runs")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of jobs")
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    site = serve_on_loopback(_Busy, "busy-page")
    url = f"http://127.0.0.1:{site.port}/"
    sides: dict[bool, list[float]] = {False: [], True: []}
    frames: list[int] = []
    try:
        with LocalStack(api_port=0, workers=1, concurrency=1) as stack:
            one_job(stack, url, 2, watched=False)  # warm-up: the browser and the functions
            for index in range(args.rounds):
                for watched in (False, True) if index % 2 == 0 else (True, False):
                    spent, got = one_job(stack, url, args.seconds, watched=watched)
                    sides[watched].append(spent)
                    if watched:
                        frames.append(got)
                    label = "watched" if watched else "unwatched"
                    print(
                        f"round {index + 1} {label}: worker CPU {spent * 1000:.0f} ms, {got} frames"
                    )
            stack.cleanup_logs()
    finally:
        site.stop()
    unwatched = statistics.median(sides[False]) * 1000
    watched_ms = statistics.median(sides[True]) * 1000
    print(
        f"live view: worker CPU per job {unwatched:.0f} ms unwatched, {watched_ms:.0f} ms "
        f"watched (+{watched_ms - unwatched:.0f} ms, {statistics.median(frames):.0f} frames "
        f"in {args.seconds} s)"
    )


if __name__ == "__main__":
    with Measured("bench/watcher_cost.py"):
        main()
