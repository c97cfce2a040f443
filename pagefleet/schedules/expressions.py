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

import functools
import re
import zoneinfo
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
# The years a Scheduler expression can name: a cron's year field takes 1970-2199 (EventBridge's
# cron reference); an at() is held to the same years, and a rate to intervals that fit them.
FIRST_YEAR, LAST_YEAR = 1970, 2199
_LAST_MOMENT = datetime(LAST_YEAR, 12, 31, 23, 59, 59, tzinfo=UTC)
_MAX_RATE_S = int((_LAST_MOMENT - datetime(FIRST_YEAR, 1, 1, tzinfo=UTC)).total_seconds())
# Names the zone database holds that are no time zone of the IANA database: the host's own
# setting, tzdata's placeholder, and the posix/ and right/ (leap seconds) copies of the zones.
_NOT_IANA = frozenset({"localtime", "Factory", "posixrules"})
_NOT_IANA_PREFIXES = ("posix/", "right/")


class InvalidExpression(ValueError):
    """The expression or time zone is not one EventBridge Scheduler would accept (or one that
    would never fire); ``field`` names which."""

    def __init__(self, message: str, *, field: str = "expression") -> None:
        super().__init__(message)
        self.field = field


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
        # Years that do not match are jumped over, not walked minute by minute (cronsim gives
        # up 50 years after where it starts, so a cron that never matches ends too).
        year, cursor = local_after.year, local_after
        while True:
            matching = _next_year(years, year)
            if matching is None or matching > LAST_YEAR:
                return
            if matching > cursor.year:
                cursor = datetime(matching, 1, 1, tzinfo=self.zone) - timedelta(seconds=1)
            for when in CronSim(five, cursor):
                if when.year != matching:
                    year, cursor = when.year, when - timedelta(seconds=1)
                    break
                if when > local_after:
                    yield when.astimezone(UTC)
            else:
                return

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
    """Validate an expression and its time zone; raises ``InvalidExpression`` naming why.

    Stored schedules are read through this too, so it judges the text alone; what a new or
    changed schedule must also meet (an IANA zone, a time still to come) is ``check_new``.
    """
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidExpression(
            f"unknown time zone {timezone!r}; use an IANA name", field="timezone"
        ) from None
    text = expression.strip()
    at = _AT.match(text)
    if at:
        try:
            when = datetime.fromisoformat(at.group(1))
        except ValueError as exc:
            raise InvalidExpression(f"at(): {exc}") from None
        if not FIRST_YEAR <= when.year <= LAST_YEAR:
            raise InvalidExpression(
                f"at(): the year must be {FIRST_YEAR}-{LAST_YEAR}, the years Scheduler takes"
            )
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


@functools.cache
def iana_zones() -> frozenset[str]:
    """The IANA time zone names (links such as ``UTC`` or ``US/Eastern`` included)."""
    return frozenset(
        name
        for name in zoneinfo.available_timezones()
        if name not in _NOT_IANA and not name.startswith(_NOT_IANA_PREFIXES)
    )


def check_new(expression: str, timezone: str, now: datetime) -> ScheduleExpression:
    """``parse``, and what only a new or changed schedule must meet: an IANA time zone, and
    a first fire after ``now`` within the years Scheduler can name (not an at() in the
    past, a cron whose years are over, or a rate too long ever to fire)."""
    if timezone not in iana_zones():
        raise InvalidExpression(
            f"{timezone!r} is not an IANA time zone name (e.g. Europe/Paris, UTC)",
            field="timezone",
        )
    parsed = parse(expression, timezone)
    if parsed.kind == "rate":
        first = now + timedelta(seconds=_rate_seconds(parsed.text))
        if first > _LAST_MOMENT:
            raise InvalidExpression(f"{parsed.text} would first fire after {LAST_YEAR}")
        return parsed
    following = next(iter(parsed.fire_times(now)), None)
    if following is None or following > _LAST_MOMENT:
        past = "is in the past" if parsed.kind == "at" else "names no time still to come"
        raise InvalidExpression(f"{parsed.text} {past} (now {now:%Y-%m-%dT%H:%M:%SZ})")
    return parsed


def _rate_seconds(text: str) -> int:
    match = _RATE.match(text)
    if match is None:
        raise InvalidExpression("rate() takes a whole number and minute(s), hour(s) or day(s)")
    value, unit = int(match.group(1)), match.group(2).rstrip("s")
    if value < 1:
        raise InvalidExpression("rate() needs a value of at least 1")
    if value * _UNIT_SECONDS[unit] > _MAX_RATE_S:
        raise InvalidExpression(
            f"rate(): at most {_MAX_RATE_S // _UNIT_SECONDS[unit]} {unit}s, the span of the "
            f"years {FIRST_YEAR}-{LAST_YEAR} Scheduler can name"
        )
    if (value == 1) != (match.group(2) == unit):
        raise InvalidExpression(f"rate({value} {match.group(2)}): use {unit} for 1, {unit}s above")
    return value * _UNIT_SECONDS[unit]


def _to_cronsim(fields: list[str]) -> tuple[str, str]:
    minute, hour, dom, month, dow, year = fields
    dom = "*" if dom == "?" else dom
    dow = "*" if dow == "?" else _shift_weekdays(dow)
    years = year
    for part in years.split(","):
        if part == "*":
            continue
        match = _YEAR_PART.match(part)
        if match is None:
            raise InvalidExpression(f"cron(): bad year {part!r}")
        for year in (match.group(1), match.group(2)):
            if year is not None and not FIRST_YEAR <= int(year) <= LAST_YEAR:
                raise InvalidExpression(
                    f"cron(): year {year} is outside {FIRST_YEAR}-{LAST_YEAR}, the years "
                    "Scheduler takes"
                )
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


def _next_year(spec: str, year: int) -> int | None:
    """The first year from ``year`` on that the cron's year field names (None: none)."""
    found: int | None = None
    for part in spec.split(","):
        if part == "*":
            return year
        match = _YEAR_PART.match(part)
        if match is None:
            continue
        low = int(match.group(1))
        high = int(match.group(2) or (LAST_YEAR if match.group(3) else low))
        step = int(match.group(3) or 1)
        candidate = low if year <= low else low - (low - year) // step * step
        if candidate <= high and (found is None or candidate < found):
            found = candidate
    return found
