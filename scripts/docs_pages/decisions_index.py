"""The index at the top of docs/decisions.md: every entry, newest last, with a mark on those
a later entry replaced (an entry says so in a line ``Superseded by [...](#...)``)."""

from __future__ import annotations

import re

from markdown.extensions.toc import slugify

START, END = "<!-- index: written by scripts/docs_reference.py -->", "<!-- /index -->"
_HEADING = re.compile(r"^## (.+)$", re.M)


def anchor(title: str, seen: dict[str, int]) -> str:
    """The id MkDocs' toc gives a heading (its text without markup; repeats get _1, _2)."""
    slug = slugify(title.replace("`", ""), "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}_{count}"


def index(text: str) -> str:
    body = text.split(END, 1)[-1]
    entries = _HEADING.split(body)[1:]
    seen: dict[str, int] = {}
    lines = []
    for title, content in zip(entries[::2], entries[1::2], strict=True):
        superseded = re.search(r"^\*?Superseded by \[", content, re.M)
        mark = " (superseded)" if superseded else ""
        lines.append(f"- [{title}](#{anchor(title, seen)}){mark}")
    return START + "\n\n" + "\n".join(lines) + "\n\n" + END


def with_index(text: str) -> str:
    """``text`` with its index written again (placed before the first entry if it has none)."""
    if START in text:
        before, rest = text.split(START, 1)
        return before + index(text) + rest.split(END, 1)[1]
    first = text.index("\n## ")
    return text[: first + 1] + index(text) + "\n" + text[first:]
