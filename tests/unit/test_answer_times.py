"""When a session's answers came, by kind of command: the guess a call's first read waits
for, and its bounds."""

from __future__ import annotations

import pytest

from pagefleet.browsing import answer_times
from pagefleet.browsing.answer_times import MARGIN_S, AnswerTimes, kind_of


def test_a_kind_is_its_session_its_actions_and_what_it_observes() -> None:
    click = kind_of("t", "s", [{"action": "click", "selector": "#a"}], {"aria": False})
    assert click == kind_of("t", "s", [{"action": "click", "selector": "#b"}], {"aria": False})
    assert click != kind_of("t", "s", [{"action": "click", "selector": "#a"}], {"aria": True})
    assert click != kind_of("t", "s2", [{"action": "click"}], {"aria": False})
    assert click != kind_of("t", "s", [{"action": "click"}, {"action": "click"}], {"aria": False})


def test_the_guess_is_the_lower_median_of_the_last_few_less_a_margin() -> None:
    times, kind = AnswerTimes(), kind_of("t", "s", [{"action": "fill"}], {})
    assert times.first_read_s(kind) is None
    for after in (0.040, 0.030, 0.050, 0.035, 0.031):  # the oldest (40 ms) is let go
        times.found(kind, after, reads=2)
    assert times.first_read_s(kind) == pytest.approx(0.031 - MARGIN_S)
    # Found by its first read: it may have come sooner, so the next guess is sooner still.
    other = kind_of("t", "s", [{"action": "click"}], {})
    times.found(other, 0.030, reads=1)
    assert times.first_read_s(other) == pytest.approx(0.030 - 2 * MARGIN_S)


def test_a_slow_kind_is_not_guessed_and_the_kinds_kept_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    times = AnswerTimes()
    goto = kind_of("t", "s", [{"action": "goto"}], {})
    times.found(goto, answer_times.LEARN_MAX_S + 0.1, reads=3)
    assert times.first_read_s(goto) is None
    monkeypatch.setattr(answer_times, "MAX_KINDS", 3)
    kinds = [kind_of("t", f"s{n}", [{"action": "fill"}], {}) for n in range(5)]
    for kind in kinds:
        times.found(kind, 0.03, reads=2)
    assert [times.first_read_s(k) is not None for k in kinds] == [False, False, True, True, True]


def test_first_read_finds_in_a_row_move_the_guess_twice_as_far_each_time() -> None:
    times, kind = AnswerTimes(), kind_of("t", "s", [{"action": "fill"}], {})
    kept = []
    for _ in range(8):  # each found by the first read at the guess
        guess = times.first_read_s(kind)
        at = 0.200 if guess is None else guess
        times.found(kind, at, reads=1)
        kept.append(round(at - times._seen[kind][-1], 4))
    steps = [MARGIN_S * 2**n for n in range(5)] + [answer_times.HIT_STEPS.cap_s] * 3
    assert kept == pytest.approx(steps)
    # A find that took more reads says when the answer came: the next hit starts over.
    times.found(kind, 0.040, reads=3)
    times.found(kind, 0.045, reads=1)
    assert times._seen[kind][-1] == pytest.approx(0.045 - MARGIN_S)
