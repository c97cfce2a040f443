"""``pagefleet stats``: the tenant's fleet figures (the console's fleet view shows the same)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from pagefleet.cli.common import ApiKey, ApiUrl, AsJson, api_client, console


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def stats(
    window: Annotated[int, typer.Option("--window", min=60, help="Seconds back.")] = 3600,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """What waits and runs now; how jobs ended and how long they took in the window."""
    with api_client(api_url, api_key) as client:
        figures = client.stats(window)
    if as_json:
        console.print_json(figures.model_dump_json())
        return
    now = Table("now", "jobs", title="waiting, running and in review")
    for state, count in figures.counts.items():
        now.add_row(state, str(count))
    now.add_row("oldest queued", _secs(figures.oldest_queued_age_s))
    console.print(now)
    ended = Table("last", f"{figures.window_s} s", title="ended")
    for state, count in sorted(figures.finished.items()):
        ended.add_row(state, str(count))
    for label, rate in (
        ("success rate", figures.success_rate),
        ("failure rate", figures.failure_rate),
        ("timeout rate", figures.timeout_rate),
        ("retry rate", figures.retry_rate),
    ):
        ended.add_row(label, _pct(rate))
    console.print(ended)
    times = Table("", "p50", "p95", "p99", title="seconds")
    for label, p in (("duration", figures.duration_s), ("queue delay", figures.queue_delay_s)):
        times.add_row(label, _secs(p.p50), _secs(p.p95), _secs(p.p99))
    console.print(times)
