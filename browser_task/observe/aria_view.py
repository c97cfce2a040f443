"""An ARIA snapshot shaped to an agent's budget: cut at ``max_chars``, or only what changed.

The diff is line by line against the last snapshot of the same scope in this session (an
ARIA snapshot is a YAML tree, one element a line): ``+ `` a line that appeared, ``- `` one
that went, nothing else; an unchanged page is an empty diff, said in words.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

UNCHANGED = "(no change since the last observation)"


@dataclass(frozen=True)
class Shaped:
    text: str
    truncated: bool
    diff: bool
    chars: int


def shape(tree: str, previous: str | None, *, max_chars: int, diff: bool) -> Shaped:
    """``tree`` as the observation carries it; ``previous`` is the last of its scope."""
    text = tree
    as_diff = diff and previous is not None
    if as_diff:
        assert previous is not None
        changed = [
            line
            for line in difflib.ndiff(previous.splitlines(), tree.splitlines())
            if line.startswith(("+ ", "- "))
        ]
        text = "\n".join(changed) if changed else UNCHANGED
    cut = len(text) > max_chars
    if cut:
        # At a line's end where there is one: half an element helps no one.
        end = text.rfind("\n", 0, max_chars)
        text = text[: end if end > max_chars // 2 else max_chars]
    return Shaped(text=text, truncated=cut, diff=as_diff, chars=len(tree))
