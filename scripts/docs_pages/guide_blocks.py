"""Generated blocks inside the hand-written guides.

A guide keeps its prose by hand, but a figure the code can compute (a price, a table of
settings) sits between two markers and is written by scripts/docs_reference.py:

    <!-- generated: cost-per-job (scripts/docs_reference.py; do not edit by hand) -->
    ...
    <!-- end generated: cost-per-job -->

``with_blocks`` returns the text with every marked block replaced by what its renderer
writes now; a marker whose name has no renderer, or a renderer whose block is missing from
its guide, is an error (a renamed block must not silently stop being checked).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[a-z0-9-]+) "
    r"\(scripts/docs_reference\.py; do not edit by hand\) -->\n)"
    r"(?P<body>.*?)"
    r"(<!-- end generated: (?P=name) -->)",
    re.DOTALL,
)


def with_blocks(text: str, renderers: Mapping[str, Callable[[], str]]) -> str:
    found: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in renderers:
            raise ValueError(f"generated block {name!r} has no renderer")
        found.add(name)
        return match.group(1) + renderers[name]().rstrip("\n") + "\n" + match.group(4)

    out = BLOCK.sub(replace, text)
    missing = sorted(set(renderers) - found)
    if missing:
        raise ValueError(f"generated blocks {missing} are missing from the guide")
    return out
