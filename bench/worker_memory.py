"""Worker memory over many jobs: peak and steady-state RSS of the worker and its browser.

    .venv/bin/python bench/worker_memory.py --jobs 500 [--concurrency 2]

An in-process worker (real Chromium, through its egress proxy) runs N small jobs against a
moto server and a page server, all on 127.0.0.1. Every 0.5 s it samples the RSS of
- the Python process (the worker and the small page server; moto runs in its own process
  so its growing store is not counted),
- the Playwright driver (node),
- the Chromium process tree (browser, renderers, helpers; RSS summed per process, so pages
  shared between Chromium processes count more than once: an upper bound).
It prints peak and steady state (median of the second half of the run). Nothing asserted.
The worker's resolver resolves no names, so nothing can leave the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3
import psutil

from devstack.loopback import LoopbackServer, serve_on_loopback

MB = 1024 * 1024


async def no_dns(host: str) -> list[str]:
    raise OSError(-2, "no DNS in this bench")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("moto_server did not start")


def page_server() -> LoopbackServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            rows = "".join(f"<li class=item>item {i}</li>" for i in range(50))
            body = f"<title>b</title><h1 id=h>bench</h1><ul>{rows}</ul>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return serve_on_loopback(Handler, "bench-site")


def sample() -> tuple[int, int, int]:
    me = psutil.Process(os.getpid())
    python = me.memory_info().rss
    driver = browser = 0
    for proc in me.children(recursive=True):
        try:
            name = proc.name().lower()
            rss = proc.memory_info().rss
            if "moto" in " ".join(proc.cmdline()):
                continue  # the stand-in for AWS is not the worker
        except psutil.Error:
            continue
        if "chrom" in name:
            browser += rss
        elif "node" in name:
            driver += rss
    return python, driver, browser


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()

    port = free_port()
    moto = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(port)
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
        }
    )
    import logging

    logging.disable(logging.WARNING)

    from browser_task.worker import Worker
    from devstack.provision import create_all
    from pagefleet.jobs.service import submit_job
    from pagefleet.models import JobRequest
    from pagefleet.runtime import RUNTIME
    from pagefleet.settings import WorkerSettings

    res = create_all(
        boto3.client("dynamodb"),
        boto3.client("sqs"),
        boto3.client("s3"),
        prefix=f"m{uuid.uuid4().hex[:6]}-",
    )
    settings = WorkerSettings(
        jobs_table=res.jobs_table,
        tenants_table=res.tenants_table,
        artifacts_bucket=res.artifacts_bucket,
        queue_urls=res.queue_urls,
        allow_loopback=True,
        poll_wait_seconds=1,
        concurrency=args.concurrency,
    )
    services = RUNTIME.job_services(settings)
    server = page_server()
    site = server.url
    worker = Worker(settings, services, resolver=no_dns)
    thread = threading.Thread(target=lambda: asyncio.run(worker.run()), daemon=True)
    thread.start()
    assert worker.ready.wait(60), "worker did not start"

    request = JobRequest.model_validate(
        {
            "max_attempts": 1,
            "steps": [
                {"action": "goto", "url": f"{site}/"},
                {"action": "extract", "name": "items", "selector": ".item", "many": True},
                {"action": "screenshot", "name": "page"},
            ],
        }
    )
    samples: list[tuple[float, int, int, int]] = []
    stop = threading.Event()

    def sampler() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), *sample()))
            stop.wait(0.5)

    threading.Thread(target=sampler, daemon=True).start()
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        ids = list(
            pool.map(lambda _n: submit_job(services, "bench", request).job.job_id, range(args.jobs))
        )
    statuses: dict[str, int] = {}
    for job_id in ids:
        while True:
            job = services.store.get("bench", job_id)
            if job.status.is_final:
                statuses[job.status.value] = statuses.get(job.status.value, 0) + 1
                break
            time.sleep(0.2)
    elapsed = time.monotonic() - started
    stop.set()

    def figures(index: int) -> tuple[float, float]:
        values = [s[index] for s in samples]
        tail = values[len(values) // 2 :] or values
        return max(values) / MB, statistics.median(tail) / MB

    totals = [s[1] + s[2] + s[3] for s in samples]
    driver_plus_browser = [s[2] + s[3] for s in samples]
    print(
        f"jobs: {args.jobs} in {elapsed:.0f} s ({statuses}); "
        f"browser launches: {worker.browsers.launches}"
    )
    print(f"{'':32} {'peak MB':>9} {'steady MB':>10}")
    for label, index in (
        ("python (worker + page server)", 1),
        ("playwright driver (node)", 2),
        ("chromium tree (RSS summed)", 3),
    ):
        peak, steady = figures(index)
        print(f"{label:32} {peak:9.0f} {steady:10.0f}")
    for label, values in (("driver + chromium", driver_plus_browser), ("all of it", totals)):
        tail = values[len(values) // 2 :] or values
        print(f"{label:32} {max(values) / MB:9.0f} {statistics.median(tail) / MB:10.0f}")
    sys.stdout.flush()

    worker.request_stop()
    thread.join(60)
    server.stop()
    moto.terminate()
    try:
        moto.wait(10)
    except subprocess.TimeoutExpired:
        moto.kill()


if __name__ == "__main__":
    main()
