"""Schedule expressions in EventBridge Scheduler's dialect, and their next fire times."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from pagefleet.schedules.expressions import InvalidExpression, parse

NOV_30 = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)


def iso(times: list[datetime]) -> list[str]:
    return [t.strftime("%Y-%m-%dT%H:%M") for t in times]


def test_cron_in_kolkata_fires_at_local_time_on_weekdays() -> None:
    # 09:30 Monday to Friday in India is 04:00 UTC (IST is UTC+5:30, no daylight saving).
    expr = parse("cron(30 9 ? * MON-FRI *)", "Asia/Kolkata")
    # Monday 30 Nov 2026, 05:30 IST: today's 09:30 is still ahead.
    assert iso(expr.next_times(NOV_30, 4)) == [
        "2026-11-30T04:00",
        "2026-12-01T04:00",
        "2026-12-02T04:00",
        "2026-12-03T04:00",
    ]
    friday_evening = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    assert iso(expr.next_times(friday_evening, 1)) == ["2026-12-07T04:00"]


def test_numeric_days_of_week_count_from_sunday_as_eventbridge_does() -> None:
    sundays = parse("cron(0 8 ? * 1 *)")
    assert [t.strftime("%a") for t in sundays.next_times(NOV_30, 3)] == ["Sun"] * 3
    weekdays = parse("cron(0 8 ? * 2-6 *)")
    assert {t.strftime("%a") for t in weekdays.next_times(NOV_30, 10)} == {
        "Mon",
        "Tue",
        "Wed",
        "Thu",
        "Fri",
    }
    third_friday = parse("cron(0 8 ? * 6#3 *)")
    assert iso(third_friday.next_times(NOV_30, 2)) == ["2026-12-18T08:00", "2027-01-15T08:00"]


def test_last_day_of_month_and_years() -> None:
    last = parse("cron(0 12 L * ? *)")
    assert iso(last.next_times(NOV_30, 3)) == [
        "2026-11-30T12:00",
        "2026-12-31T12:00",
        "2027-01-31T12:00",
    ]
    only_2028 = parse("cron(0 0 1 1 ? 2028)")
    assert iso(only_2028.next_times(NOV_30, 3)) == ["2028-01-01T00:00"]


def test_rate_counts_from_the_schedules_start() -> None:
    expr = parse("rate(15 minutes)")
    start = datetime(2026, 11, 29, 23, 50, tzinfo=UTC)
    assert iso(expr.next_times(NOV_30, 3, anchor=start)) == [
        "2026-11-30T00:05",
        "2026-11-30T00:20",
        "2026-11-30T00:35",
    ]
    assert iso(parse("rate(1 day)").next_times(NOV_30, 1, anchor=NOV_30)) == ["2026-12-01T00:00"]


def test_at_fires_once_in_its_time_zone() -> None:
    expr = parse("at(2026-12-01T09:00:00)", "Europe/Paris")
    assert iso(expr.next_times(NOV_30, 5)) == ["2026-12-01T08:00"]
    assert expr.next_times(datetime(2026, 12, 2, tzinfo=UTC), 5) == []


@pytest.mark.parametrize(
    ("expression", "timezone", "problem"),
    [
        ("cron(0 8 * * * *)", "UTC", "exactly one of"),
        ("cron(0 8 ? * ? *)", "UTC", "exactly one of"),
        ("cron(0 25 * * ? *)", "UTC", "cron()"),
        ("cron(0 8 * *)", "UTC", "6 fields"),
        ("cron(0 8 ? * 9 *)", "UTC", "1-7"),
        ("cron(0 8 * * ? 20x6)", "UTC", "year"),
        ("rate(0 minutes)", "UTC", "at least 1"),
        ("rate(5 minute)", "UTC", "minutes"),
        ("rate(5 weeks)", "UTC", "rate()"),
        ("at(2026-13-01T00:00:00)", "UTC", "at()"),
        ("every day", "UTC", "expected cron"),
        ("rate(5 minutes)", "Mars/Olympus", "time zone"),
    ],
)
def test_invalid_expressions_say_why(expression: str, timezone: str, problem: str) -> None:
    with pytest.raises(InvalidExpression, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse(expression, timezone)


def test_time_zones_resolve_without_a_system_zone_database() -> None:
    """The AL2023-based Lambda runtimes start from a minimal image; with no system database
    (``PYTHONTZPATH`` empty, as the local stack's functions run) every zone must still
    resolve, from the tzdata package: without it, a schedule in any zone and a job's
    ``options.timezone_id`` were refused ("not an IANA time zone")."""
    check = (
        "import zoneinfo\n"
        "from datetime import UTC, datetime\n"
        "from pagefleet.jobs.options import JobOptions\n"
        "from pagefleet.schedules.expressions import check_new\n"
        "assert zoneinfo.TZPATH == ()\n"
        "JobOptions(timezone_id='Europe/Paris')\n"
        "check_new('cron(0 9 * * ? *)', 'America/New_York', datetime(2026, 12, 7, tzinfo=UTC))\n"
        "check_new('rate(1 hour)', 'UTC', datetime(2026, 12, 7, tzinfo=UTC))\n"
    )
    env = {**os.environ, "PYTHONTZPATH": ""}
    ran = subprocess.run(
        [sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
