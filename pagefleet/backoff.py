"""How long to wait before trying again: one value type for every backoff the platform does.

A ``Backoff`` is exponential, ``ceiling(n) = min(cap, base * 2**(n-1))`` for the n-th wait
(n ≥ 1), and a jitter says where in that ceiling a wait falls. Which jitter each user takes,
and why, is in docs/decisions.md (2026-12-05, "One backoff").
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

# 2**62 times any base is past every cap; a larger exponent would only risk an overflow.
_MAX_DOUBLINGS = 62


class Jitter(StrEnum):
    """Where a wait falls given its ceiling ``c``."""

    NONE = "none"  # exactly c: a fixed ladder
    FULL = "full"  # anywhere in [0, c]: competing clients spread the most
    EQUAL = "equal"  # in [c/2, c]: spread, yet never much sooner than c
    ADDED = "added"  # in [c, 1.5c]: at least c, spread over half again


@dataclass(frozen=True)
class Backoff:
    base_s: float
    cap_s: float
    jitter: Jitter

    def __post_init__(self) -> None:
        if not 0 < self.base_s <= self.cap_s:
            raise ValueError(f"a backoff needs 0 < base <= cap, not {self.base_s}, {self.cap_s}")

    def ceiling(self, attempt: int) -> float:
        """The n-th wait's ceiling (``attempt`` below 1 counts as 1)."""
        doublings = min(max(0, attempt - 1), _MAX_DOUBLINGS)
        return float(min(self.cap_s, self.base_s * 2**doublings))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        return self.spread(self.ceiling(attempt), rng)

    def spread(self, ceiling: float, rng: random.Random | None = None) -> float:
        """A wait around ``ceiling`` by this backoff's jitter (for a caller whose ceiling
        also depends on something else, e.g. the tenant gate's backlog)."""
        draw = (rng or random).random
        match self.jitter:
            case Jitter.NONE:
                return ceiling
            case Jitter.FULL:
                return ceiling * draw()
            case Jitter.EQUAL:
                return ceiling / 2 + ceiling / 2 * draw()
            case Jitter.ADDED:
                return ceiling + ceiling / 2 * draw()

    def ladder(self, tries: int, rng: random.Random | None = None) -> Iterator[float]:
        """The waits before each of ``tries`` tries: none before the first."""
        if tries > 0:
            yield 0.0
        for attempt in range(1, tries):
            yield self.delay(attempt, rng)
