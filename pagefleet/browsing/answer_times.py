"""When a session's answers come: learned per session and kind of command, in this process.

A call reads its command's record until the answer is in (``stepping.await_record``). A read
before the answer finds nothing: it is a request billed for nothing on AWS, and on the local
stack it holds up the embedded AWS the step's own writes (its claim, its answer) wait for.
The commands of one kind in one session (the same actions, the same observation) take about
as long as their last ones did, so a call's first read waits until a little before the lower
median of the last few of its kind (``RECENT``) was found, then reads closely a few times
(``SHORT_READS``) before the usual schedule. A kind that took longer than ``LEARN_MAX_S``
is read on the usual schedule: its waits vary too much for a guess to save anything.

Kept in memory (the API's execution environment serves a session's calls one after the
other while it is warm), bounded (``MAX_KINDS``); nothing here changes what a call answers,
only when it reads.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict, deque
from typing import Any

from pagefleet.backoff import Backoff, Jitter

# How many of a kind's last answer times are kept.
RECENT = 4
# The first read goes this long before the lower median of them.
MARGIN_S = 0.002
# After a first read that found nothing, this many reads this far apart, then the usual.
SHORT_READS = 2
SHORT_PAUSE_S = 0.002
# Found by its first read again and again, the guess is too late by more than a margin: each
# such time is kept twice as much earlier as the one before (from ``MARGIN_S``, at most
# 32 ms), so a guess learned from slow first answers comes down in a few steps, not a margin
# a step; one that overshoots is found by the close reads or the usual schedule.
HIT_STEPS = Backoff(base_s=MARGIN_S, cap_s=0.032, jitter=Jitter.NONE)
# Longer answers are read on the usual schedule: a command of a kind that took this long
# lately, quicker this time, is seen at most this late (it was read for ~every 5-30 ms).
LEARN_MAX_S = 0.25
MAX_KINDS = 1000

Kind = tuple[str, str, str]


def kind_of(tenant_id: str, session_id: str, steps: list[dict[str, Any]], observe: Any) -> Kind:
    """The kind of a command: its session, its steps' actions and what it observes."""
    actions = [str(step.get("action")) for step in steps]
    return tenant_id, session_id, json.dumps([actions, observe], sort_keys=True, default=str)


class AnswerTimes:
    def __init__(self) -> None:
        self._seen: OrderedDict[Kind, deque[float]] = OrderedDict()
        # Each kind's first-read finds in a row (reset by a find that took more reads).
        self._hits: dict[Kind, int] = {}
        self._lock = threading.Lock()

    def first_read_s(self, kind: Kind) -> float | None:
        """When (seconds after the command's record was sent) to read first, or None: no
        guess, the usual schedule."""
        with self._lock:
            seen = self._seen.get(kind)
            if not seen:
                return None
            ordered = sorted(seen)
        guess = ordered[(len(ordered) - 1) // 2]
        return guess - MARGIN_S if guess <= LEARN_MAX_S else None

    def found(self, kind: Kind, after_s: float, reads: int) -> None:
        """The read that found the answer was sent ``after_s`` after the record, the
        ``reads``-th. Found by the first, it may have been there sooner: the time is kept
        earlier (``MARGIN_S``, doubled for each such find in a row), so the next first read
        comes sooner still, until one finds nothing (and the close reads after it say when
        the answer came)."""
        with self._lock:
            hits = self._hits.get(kind, 0) + 1 if reads == 1 else 0
            if hits:
                after_s -= HIT_STEPS.delay(hits)
            seen = self._seen.pop(kind, None) or deque(maxlen=RECENT)
            seen.append(after_s)
            self._seen[kind] = seen
            self._hits[kind] = hits
            while len(self._seen) > MAX_KINDS:
                gone, _ = self._seen.popitem(last=False)
                self._hits.pop(gone, None)
