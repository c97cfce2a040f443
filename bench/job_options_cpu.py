"""What HAR capture and request blocking cost (or save) a job: CPU and time against without.

    .venv/bin/python bench/job_options_cpu.py [--jobs 12] [--rounds 4]

One local stack (one worker, 2 slots) and a page on loopback that weighs what a shop's page
weighs: a stylesheet, 16 images (64 KB of noise each, so they are decoded, not just
counted) and 2 web fonts. The same job (``goto`` the page, wait for its ``load``, extract
its heading) runs in four variants: without options (the baseline), with ``options.har:
true`` (the traffic recorded with its bodies, redacted and uploaded as ``har.zip``), and
with ``options.block`` of images and fonts, and with ``options.block.urls`` of a glob the
page never meets (every request matched in the worker). Each round runs ``--jobs`` jobs of
each variant, the order of the variants rotating from round to round so that drifting load
weighs on each alike. For each it reads:

- the worker's CPU per job (its Python, the Playwright driver and Chromium, from the
  kernel: what the job costs on the worker's machine on AWS) and the whole platform's
  (the embedded AWS and the functions too, ``bench/cpu_per_job.py``'s parts);
- the job's time: each attempt's ``finished_at - started_at`` as the worker wrote it (the
  slot's time, what usage bills).

Prints a table per variant and round, then one line per option: its median ratio to the
baseline over the rounds (each round's pair gives one ratio), e.g.
``options.har: worker CPU per job 1.31x (212 ms vs 162 ms), job time 1.12x``. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import struct
import sys
import zlib
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from bench.common import Measured, lift_submission_rate
from bench.cpu_per_job import snapshot, worker_cpu
from bench.e2e_throughput import final_records
from devstack.loopback import serve_on_loopback
from devstack.stack import LocalStack
from pagefleet.jobs.models import epoch_of_iso
from pagefleet.jobs.states import JobStatus

console = Console()
IMAGES = 16
FONTS = 2
VARIANTS: dict[str, dict[str, Any]] = {
    "baseline": {},
    "options.har": {"har": True},
    "options.block": {"block": {"resource_types": ["image", "font"]}},
    # A URL glob that matches nothing on the page: what matching every request in the
    # worker costs (browser_task.run.url_patterns; a string glob paused only its matches).
    "options.block.urls": {"block": {"urls": ["**/ads/**"]}},
}


def _png(seed: int, side: int = 128) -> bytes:
    """A ``side`` x ``side`` RGBA PNG of noise (about 64 KB: incompressible, so the browser
    receives and decodes every byte)."""
    noise = random.Random(seed)
    rows = b"".join(b"\x00" + noise.randbytes(side * 4) for _ in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", side, side, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 1))
        + chunk(b"IEND", b"")
    )


def _page() -> bytes:
    faces = "".join(
        f"@font-face {{ font-family: F{i}; src: url('/font{i}.woff2'); }} "
        f".f{i} {{ font-family: F{i}; }}"
        for i in range(FONTS)
    )
    images = "".join(f'<img src="/img{i}.png" width="128" height="128">' for i in range(IMAGES))
    texts = "".join(f'<p class="f{i}">text in a web font</p>' for i in range(FONTS))
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>catalogue</title>'
        f'<link rel="stylesheet" href="/style.css"><style>{faces}</style></head>'
        f"<body><h1>Catalogue</h1>{texts}{images}</body></html>"
    ).encode()


def _files() -> dict[str, tuple[bytes, str]]:
    files = {
        "/": (_page(), "text/html; charset=utf-8"),
        "/style.css": (
            b"body { margin: 1rem; font-family: sans-serif } img { margin: 2px }",
            "text/css",
        ),
    }
    files.update({f"/img{i}.png": (_png(i), "image/png") for i in range(IMAGES)})
    noise = random.Random(99)
    files.update(
        {f"/font{i}.woff2": (noise.randbytes(32 * 1024), "font/woff2") for i in range(FONTS)}
    )
    return files


FILES = _files()


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        found = FILES.get(self.path.split("?")[0])
        if found is None:
            self.send_error(404)
            return
        body, kind = found
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")  # every job fetches every byte
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


def _request(site: str, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "bench-job-options",
        "max_attempts": 1,
        "options": options,
        "steps": [
            {"action": "goto", "url": f"{site}/"},
            {"action": "wait_for", "load_state": "load"},
            {"action": "extract", "name": "heading", "selector": "h1"},
        ],
    }


def _job_seconds(stack: LocalStack, job_ids: list[str]) -> list[float]:
    """Each job's attempt time once it ended (written by the worker)."""
    seconds = []
    for record in final_records(stack, job_ids, timeout_s=600):
        if record.status is not JobStatus.SUCCEEDED:
            raise RuntimeError(f"job {record.job_id} ended {record.status}: {record.error}")
        attempt = record.attempts[-1]
        assert attempt.finished_at is not None
        seconds.append(epoch_of_iso(attempt.finished_at) - epoch_of_iso(attempt.started_at))
    return seconds


def run_variant(
    stack: LocalStack, site: str, options: dict[str, Any], jobs: int
) -> dict[str, float]:
    """One batch of ``jobs`` jobs: worker and platform CPU per job, median job time."""
    with stack.client() as api:
        before = snapshot()
        ids = [api.submit(_request(site, options)).job_id for _ in range(jobs)]
        seconds = _job_seconds(stack, ids)
        after = snapshot()
    per_part = {part: (after[part] - before.get(part, 0.0)) / jobs for part in after}
    return {
        "worker": worker_cpu(per_part),
        "platform": sum(per_part.values()),
        "time": statistics.median(seconds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=12, help="jobs per variant and round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of the variants")
    args = parser.parse_args(argv)
    if args.jobs < 2 or args.rounds < 1:
        parser.error("--jobs must be at least 2 and --rounds at least 1")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    names = list(VARIANTS)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    with Measured("bench/job_options_cpu.py") as measured:
        site = serve_on_loopback(_Site, "bench-site")
        try:
            with LocalStack(api_port=0, workers=1, concurrency=2) as stack:
                lift_submission_rate(stack)
                for name in names:  # warm-up: every path has served a job
                    run_variant(stack, site.url, VARIANTS[name], 2)
                for index in range(args.rounds):
                    order = names[index % len(names) :] + names[: index % len(names)]
                    for name in order:
                        with console.status(f"round {index + 1}/{args.rounds}: {name}…"):
                            runs[name].append(
                                run_variant(stack, site.url, VARIANTS[name], args.jobs)
                            )
                stack.cleanup_logs()
        finally:
            site.stop()
        report(runs, args.jobs)
        measured.end()
    base = runs["baseline"]
    for name in names[1:]:
        print(_line(name, runs[name], base))
    return 0


def report(runs: dict[str, list[dict[str, float]]], jobs: int) -> None:
    table = Table(
        f"variant ({jobs} jobs a round)",
        "worker CPU ms/job",
        "platform CPU ms/job",
        "job time ms",
        "rounds (worker CPU ms/job)",
    )
    for name, rounds in runs.items():
        table.add_row(
            name,
            f"{statistics.median(r['worker'] for r in rounds) * 1000:.0f}",
            f"{statistics.median(r['platform'] for r in rounds) * 1000:.0f}",
            f"{statistics.median(r['time'] for r in rounds) * 1000:.0f}",
            ", ".join(f"{r['worker'] * 1000:.0f}" for r in rounds),
        )
    console.print(table)


def _line(name: str, rounds: list[dict[str, float]], base: list[dict[str, float]]) -> str:
    def ratio(key: str) -> float:
        return statistics.median(r[key] / b[key] for r, b in zip(rounds, base, strict=True))

    mine = statistics.median(r["worker"] for r in rounds) * 1000
    theirs = statistics.median(b["worker"] for b in base) * 1000
    return (
        f"{name}: worker CPU per job {ratio('worker'):.2f}x ({mine:.0f} ms vs {theirs:.0f} ms "
        f"without), platform CPU {ratio('platform'):.2f}x, job time {ratio('time'):.2f}x"
    )


if __name__ == "__main__":
    sys.exit(main())
