"""Order chaos: jobs that each place one order while workers and Chromium die; no order twice.

    .venv/bin/python bench/chaos_orders.py [--jobs 200] [--kill-every 20] [--kill-at-order 0.08]

One local stack (moto, gateway, 2 workers x 2 slots on a 10 s lease, real Chromium) and its
demo shop's order desk. Each job places one order (examples/workflows/place-order.json, the
job's id as the order's reference); half of them have a check on the "Place order" click.
While they run: a worker SIGKILLed (with its Chromium) every ~``--kill-every`` s, a
worker's Chromium every ~``--chromium-kill-every`` s, the worker placing an order killed
(or its Chromium) right as the desk records it, before its answer, for
``--kill-at-order`` (``--chromium-at-order``) of the orders, and ``--drop-rate`` of the
answers dropped after the order was recorded (devstack/order_chaos.py).

Then it waits until every job settled and prints
``orders: <N> jobs, <D> doubled, <R> needs_review (all without check)``. Exit status 1 if
an order was doubled, a job ended otherwise than succeeded (one order), failed before its
click (none) or in review (without a check), or did not settle. Timings are printed only.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from bench.common import Measured
from devstack.chaos import chaos_worker_env
from devstack.order_chaos import OrderChaos, run_order_chaos
from devstack.stack import LocalStack

console = Console()


def main() -> int:
    defaults = OrderChaos()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=defaults.jobs)
    parser.add_argument("--rate", type=float, default=defaults.rate, help="submissions/s")
    parser.add_argument("--kill-every", type=float, default=defaults.kill_every_s)
    parser.add_argument("--chromium-kill-every", type=float, default=defaults.chromium_kill_every_s)
    parser.add_argument("--kill-at-order", type=float, default=defaults.kill_at_order)
    parser.add_argument("--chromium-at-order", type=float, default=defaults.chromium_at_order)
    parser.add_argument("--drop-rate", type=float, default=defaults.drop_rate)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args()
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    chaos = OrderChaos(
        jobs=args.jobs,
        rate=args.rate,
        kill_every_s=args.kill_every,
        chromium_kill_every_s=args.chromium_kill_every,
        kill_at_order=args.kill_at_order,
        chromium_at_order=args.chromium_at_order,
        drop_rate=args.drop_rate,
        seed=args.seed,
    )
    stack = LocalStack(
        api_port=0,
        workers=chaos.workers,
        concurrency=2,
        sweeper_interval_s=5,
        worker_env=chaos_worker_env(POWERTOOLS_LOG_LEVEL="WARNING"),
    )
    with stack:
        console.print(f"stack up; logs in {stack.log_dir}")
        report = run_order_chaos(stack, chaos, log=console.print)
    table = Table(title=f"order chaos: {report.jobs} jobs in {report.took_s:.0f} s")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for status, count in sorted(report.statuses.items()):
        table.add_row(status, str(count))
    table.add_row(
        "with a check / without",
        f"{len(report.with_check)} / {report.jobs - len(report.with_check)}",
    )
    for kind, count in sorted(report.kills.items()):
        table.add_row(f"killed: {kind}", str(count))
    table.add_row("DOUBLED orders (must be 0)", str(len(report.doubled)))
    table.add_row("endings that break the promise (must be 0)", str(len(report.wrong)))
    table.add_row("not settled (must be 0)", str(len(report.unsettled)))
    console.print(table)
    for line in report.wrong[:20]:
        console.print(f"  [red]{line}[/]", highlight=False)
    print(report.line())
    return 0 if report.ok else 1


if __name__ == "__main__":
    with Measured("bench/chaos_orders.py"):
        code = main()
    sys.exit(code)
