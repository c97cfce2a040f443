"""Password fields' values hidden in an ARIA snapshot (browser_task.observe.aria), on the
snapshot text Playwright writes: plain and YAML-quoted values, names and attributes."""

from __future__ import annotations

from browser_task.observe.aria import hide_passwords

TREE = """- heading "Sign in" [level=1]
- textbox "User": hunter2 and more
- textbox "Password": hunter2
- textbox [disabled]: "a: b\\"c"
- paragraph: hunter2"""


def test_only_text_boxes_holding_a_password_are_hidden() -> None:
    hidden = hide_passwords(TREE, {"hunter2", 'a: b"c'})
    assert hidden.splitlines() == [
        '- heading "Sign in" [level=1]',
        '- textbox "User": hunter2 and more',
        '- textbox "Password": ***',
        "- textbox [disabled]: ***",
        "- paragraph: hunter2",  # a page's text is the masker's, not this
    ]


def test_no_password_leaves_the_tree_as_it_is() -> None:
    assert hide_passwords(TREE, set()) == TREE
    assert hide_passwords(TREE, {"other"}) == TREE
