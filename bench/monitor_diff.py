"""CPU per monitor run: what comparing a run with its baseline costs the worker.

    .venv/bin/python bench/monitor_diff.py [--repeat 20]

Two parts, each beside a baseline run in the same process:

- records: ``pagefleet.monitors.changes.compare`` on a catalogue of 50 and of 1,000 records
  (one price changed, one record added, the list reordered), then ``changes.json`` written;
  beside it, a text diff of the two results (``difflib`` on sorted, indented JSON), which is
  what a text-diffing watcher does (and reports a reordered list as all changed);
- pixels: ``browser_task.run.visual.pixel_diff`` on two 1280x800 screenshots (a button moved),
  diff.png included; beside it the same comparison pixel by pixel in Python, the way
  pixelmatch (pure Python) works, on the same pair.

CPU time (``time.process_time``), the median of ``--repeat`` runs (the Python pixel loop
runs once). Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image, ImageDraw

from bench.common import Measured
from browser_task.run.visual import CHANNEL_TOLERANCE, pixel_diff
from pagefleet.monitors.changes import compare
from pagefleet.monitors.spec import Monitor

TRACK = Monitor.model_validate({"track": {"products": {"key": "sku"}}})


def catalogue(size: int) -> tuple[dict[str, Any], dict[str, Any]]:
    rng = random.Random(size)
    before = [
        {
            "sku": f"SKU-{n}",
            "name": f"Product {n}",
            "price": f"{rng.uniform(1, 99):.2f}",
            "stock": n % 7,
        }
        for n in range(size)
    ]
    after = [dict(p) for p in before]
    after[size // 2]["price"] = "1.00"
    after.append({"sku": "NEW", "name": "New product", "price": "9.99", "stock": 1})
    rng.shuffle(after)
    return {"products": before}, {"products": after}


def screenshots() -> tuple[bytes, bytes]:
    def draw(button_left: int) -> bytes:
        image = Image.new("RGB", (1280, 800), "white")
        pen = ImageDraw.Draw(image)
        for y in range(20, 700, 22):
            pen.text((24, y), f"Storm lantern {y} .......... 18.50   4 in stock", fill="black")
        pen.rectangle((button_left, 720, button_left + 160, 768), fill=(21, 101, 192))
        out = io.BytesIO()
        image.save(out, format="PNG")
        return out.getvalue()

    return draw(24), draw(400)


def python_pixels(before_png: bytes, after_png: bytes) -> float:
    """Pixel by pixel in Python, as pixelmatch does (without its anti-aliasing pass)."""
    a = Image.open(io.BytesIO(before_png)).convert("RGB").tobytes()
    b = Image.open(io.BytesIO(after_png)).convert("RGB").tobytes()
    changed = 0
    for i in range(0, len(a), 3):
        if (
            max(abs(a[i] - b[i]), abs(a[i + 1] - b[i + 1]), abs(a[i + 2] - b[i + 2]))
            > CHANNEL_TOLERANCE
        ):
            changed += 1
    return changed / (len(a) // 3)


def cpu_ms(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.process_time()
        work()
        times.append((time.process_time() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(f"{'part':<28}{'ours (ms CPU)':>15}{'baseline (ms CPU)':>20}{'ratio':>9}")
    for size in (50, 1000):
        before, after = catalogue(size)

        def ours(b: dict[str, Any] = before, a: dict[str, Any] = after) -> object:
            return compare(b, a, TRACK, baseline_job_id="b" * 26).model_dump_json(indent=2)

        def text(b: dict[str, Any] = before, a: dict[str, Any] = after) -> object:
            left = json.dumps(b, indent=2, sort_keys=True).splitlines()
            right = json.dumps(a, indent=2, sort_keys=True).splitlines()
            return list(difflib.unified_diff(left, right))

        mine, theirs = cpu_ms(ours, args.repeat), cpu_ms(text, args.repeat)
        label = f"records x {size}"
        print(f"{label:<28}{mine:>15.2f}{theirs:>20.2f}{theirs / mine:>9.1f}")
    first, second = screenshots()
    for label, other in (("screenshot, unchanged", first), ("screenshot, button moved", second)):
        mine = cpu_ms(lambda o=other: pixel_diff(first, o), args.repeat)  # type: ignore[misc]
        theirs = cpu_ms(lambda o=other: python_pixels(first, o), 1)  # type: ignore[misc]
        print(f"{label:<28}{mine:>15.2f}{theirs:>20.2f}{theirs / mine:>9.1f}")
    ratio, same = pixel_diff(first, second).ratio, python_pixels(first, second)
    print(f"(the moved button's changed-pixel ratio: {ratio:.4f}; the Python loop's: {same:.4f})")


if __name__ == "__main__":
    with Measured("bench/monitor_diff.py"):
        main()
