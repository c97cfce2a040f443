"""An observation's ARIA snapshot within an agent's budget: cut where asked, saying so, or
only the lines that changed since the last one."""

from __future__ import annotations

from browser_task.observe.aria_view import UNCHANGED, shape

PAGE = "\n".join(
    [
        '- heading "Shop" [level=1] [ref=e2]',
        '- textbox "Search" [ref=e3]',
        '- button "Go" [ref=e4]',
        "- list [ref=e5]:",
        *[f"  - listitem [ref=e{n}]: item {n}" for n in range(6, 60)],
    ]
)


def test_a_snapshot_over_its_budget_is_cut_at_a_line_end_and_says_so() -> None:
    shaped = shape(PAGE, None, max_chars=200, diff=False)
    assert shaped.truncated and shaped.chars == len(PAGE)
    assert len(shaped.text) <= 200
    assert PAGE.startswith(shaped.text) and PAGE[len(shaped.text)] == "\n"
    whole = shape(PAGE, None, max_chars=len(PAGE), diff=False)
    assert (whole.text, whole.truncated) == (PAGE, False)


def test_a_diff_holds_only_the_lines_that_changed() -> None:
    after = PAGE.replace('- textbox "Search" [ref=e3]', '- textbox "Search" [ref=e3]: tea')
    after += "\n- status [ref=e99]: 3 results"
    shaped = shape(after, PAGE, max_chars=20_000, diff=True)
    assert shaped.diff
    assert shaped.text.splitlines() == [
        '- - textbox "Search" [ref=e3]',
        '+ - textbox "Search" [ref=e3]: tea',
        "+ - status [ref=e99]: 3 results",
    ]
    assert shaped.chars == len(after)


def test_a_first_observation_asked_as_a_diff_is_the_whole_snapshot() -> None:
    shaped = shape(PAGE, None, max_chars=20_000, diff=True)
    assert (shaped.text, shaped.diff) == (PAGE, False)


def test_an_unchanged_page_is_said_in_words() -> None:
    assert shape(PAGE, PAGE, max_chars=20_000, diff=True).text == UNCHANGED
