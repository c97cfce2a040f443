"""Schedule expressions as EventBridge Scheduler takes them, and their fire times.

``cron(min hour day-of-month month day-of-week year)``, ``rate(N unit)`` and
``at(yyyy-mm-ddThh:mm:ss)``, evaluated in an IANA time zone. Cron fields are evaluated by
``cronsim`` (a well-kept evaluator that follows Debian cron, L/W/# included); this module only
translates EventBridge's dialect: ``?`` stands for "any", days of the week count 1-7 from
Sunday (cron counts 0-6), and a sixth field names years.

The local stack fires schedules from these same functions, so what the API promises as
``next_fire_times`` is what runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

_RATE = re.compile(r"^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_CRON = re.compile(r"^cron\((.+)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
_YEAR_PART = re.compile(r"^(\d{4})(?:-(\d{4}))?(?:/(\d+))?$")
# How far ahead a cron is searched for its next fire (cronsim itself stops at 50 years).
_HORIZON_YEARS = 50


class InvalidExpression(ValueError):
    """The expression or time zone is not one EventBridge Scheduler would accept."""


@dataclass(frozen=True)
class ScheduleExpression:
    kind: str  # cron | rate | at
    text: str
    timezone: str

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def fire_times(self, after: datetime, *, anchor: datetime | None = None) -> Iterator[datetime]:
        """Fire times strictly after ``after`` (aware datetimes in UTC), in order.

        A rate counts from its ``anchor`` (the schedule's start), as the Scheduler does.
        """
        after = after.astimezone(UTC)
        if self.kind == "at":
            at = datetime.fromisoformat(_AT.match(self.text).group(1))  # type: ignore[union-attr]
            when = at.replace(tzinfo=self.zone).astimezone(UTC)
            if when > after:
                yield when
            return
        if self.kind == "rate":
            step = timedelta(seconds=_rate_seconds(self.text))
            start = (anchor or after).astimezone(UTC).replace(microsecond=0)
            # The first fire after ``after`` on the anchor's grid.
            when = start if start > after else start + step * ((after - start) // step + 1)
            while True:
                yield when
                when += step
        fields = _CRON.match(self.text).group(1).split()  # type: ignore[union-attr]
        five, years = _to_cronsim(fields)
        local_after = after.astimezone(self.zone)
        limit = local_after.year + _HORIZON_YEARS
        for when in CronSim(five, local_after):
            if when.year > limit:
                return
            if when <= local_after or not _year_matches(years, when.year):
                continue
            yield when.astimezone(UTC)

    def next_times(
        self, after: datetime, count: int, anchor: datetime | None = None
    ) -> list[datetime]:
        out: list[datetime] = []
        for when in self.fire_times(after, anchor=anchor):
            out.append(when)
            if len(out) >= count:
                break
        return out


def parse(expression: str, timezone: str = "UTC") -> ScheduleExpression:
    """Validate an expression and its time zone; raises ``InvalidExpression`` naming why."""
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidExpression(f"unknown time zone {timezone!r}; use an IANA name") from None
    text = expression.strip()
    if _AT.match(text):
        try:
            datetime.fromisoformat(_AT.match(text).group(1))  # type: ignore[union-attr]
        except ValueError as exc:
            raise InvalidExpression(f"at(): {exc}") from None
        return ScheduleExpression("at", text, timezone)
    if text.startswith("rate("):
        _rate_seconds(text)
        return ScheduleExpression("rate", text, timezone)
    match = _CRON.match(text)
    if match is None:
        raise InvalidExpression(
            "expected cron(m h dom mon dow year), rate(N minutes|hours|days) or "
            "at(yyyy-mm-ddThh:mm:ss)"
        )
    fields = match.group(1).split()
    if len(fields) != 6:
        raise InvalidExpression(f"cron() takes 6 fields, got {len(fields)}")
    if (fields[2] == "?") == (fields[4] == "?"):
        raise InvalidExpression("cron(): exactly one of day-of-month and day-of-week must be ?")
    five, _ = _to_cronsim(fields)
    try:
        CronSim(five, datetime(2026, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise InvalidExpression(f"cron(): {exc}") from None
    return ScheduleExpression("cron", text, timezone)


def _rate_seconds(text: str) -> int:
    match = _RATE.match(text)
    if match is None:
        raise InvalidExpression("rate() takes a whole number and minute(s), hour(s) or day(s)")
    value, unit = int(match.group(1)), match.group(2).rstrip("s")
    if value < 1:
        raise InvalidExpression("rate() needs a value of at least 1")
    if (value == 1) != (match.group(2) == unit):
        raise InvalidExpression(f"rate({value} {match.group(2)}): use {unit} for 1, {unit}s above")
    return value * _UNIT_SECONDS[unit]


def _to_cronsim(fields: list[str]) -> tuple[str, str]:
    minute, hour, dom, month, dow, year = fields
    dom = "*" if dom == "?" else dom
    dow = "*" if dow == "?" else _shift_weekdays(dow)
    years = year
    for part in years.split(","):
        if part != "*" and _YEAR_PART.match(part) is None:
            raise InvalidExpression(f"cron(): bad year {part!r}")
    return f"{minute} {hour} {dom} {month} {dow}", years


def _shift_weekdays(dow: str) -> str:
    """EventBridge numbers Sunday..Saturday 1..7; cron numbers them 0..6."""

    def shift(match: re.Match[str]) -> str:
        number = int(match.group(0))
        if not 1 <= number <= 7:
            raise InvalidExpression(f"cron(): day-of-week {number} is not 1-7 (SUN-SAT)")
        return str(number - 1)

    # Numbers after '#' are "the Nth weekday of the month", not weekdays: left alone.
    return re.sub(r"(?<![#\d])\d+", shift, dow)


def _year_matches(spec: str, year: int) -> bool:
    for part in spec.split(","):
        if part == "*":
            return True
        match = _YEAR_PART.match(part)
        if match is None:
            continue
        low = int(match.group(1))
        high = int(match.group(2) or (9999 if match.group(3) else low))
        step = int(match.group(3) or 1)
        if low <= year <= high and (year - low) % step == 0:
            return True
    return False
