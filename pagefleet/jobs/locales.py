"""Which ``options.locale`` tags the worker's Chromium takes.

Chromium (156, measured through Playwright: ``Emulation.setLocaleOverride``) parses the tag
as a Unicode BCP 47 locale identifier (UTS #35, with ICU4X) and fails the context's
``new_page`` with "Invalid locale name" otherwise, so a job with such a tag could never
run: each attempt was taken for a browser fault (``browser_crashed``) and retried. Beyond
BCP 47's shape, it refuses a language of 4 or more letters (``root``, ``abcde``), extended
language subtags (``zh-yue``), a subtag out of its place (``en-12``), a variant or an
extension given twice, and an extension with nothing after it (``en-u``).
https://unicode.org/reports/tr35/#Unicode_locale_identifier
"""

from __future__ import annotations

import re

_ALPHANUM = re.compile(r"[a-z0-9]+")
_ORDER = (
    "after the language come a script (4 letters), a region (2 letters or 3 digits), "
    "variants (5 to 8 letters or digits, or a digit and 3 more), then extensions (a letter "
    "or digit and their subtags)"
)


def _alpha(subtag: str, *lengths: int) -> bool:
    return len(subtag) in lengths and subtag.isalpha()


def _alphanum(subtag: str, low: int, high: int) -> bool:
    return low <= len(subtag) <= high and _ALPHANUM.fullmatch(subtag) is not None


def _language(subtag: str) -> bool:
    return _alpha(subtag, 2, 3)


def _script(subtag: str) -> bool:
    return _alpha(subtag, 4)


def _region(subtag: str) -> bool:
    return _alpha(subtag, 2) or (len(subtag) == 3 and subtag.isdigit())


def _variant(subtag: str) -> bool:
    if subtag[:1].isdigit() and len(subtag) == 4:
        return _alphanum(subtag, 4, 4)
    return _alphanum(subtag, 5, 8)


def _language_id(subtags: list[str], at: int) -> tuple[int, str | None]:
    """Read script, region and variants after a language at ``at``: where reading stopped,
    and the problem found (None: none)."""
    if at < len(subtags) and _script(subtags[at]):
        at += 1
    if at < len(subtags) and _region(subtags[at]):
        at += 1
    variants: set[str] = set()
    while at < len(subtags) and _variant(subtags[at]):
        if subtags[at] in variants:
            return at, f"the variant {subtags[at]!r} is given twice"
        variants.add(subtags[at])
        at += 1
    return at, None


def _unicode_extension(subtags: list[str], at: int) -> tuple[int, bool]:
    """``-u-``: attributes (3 to 8 letters or digits), then keywords (a key of a letter or
    digit and a letter, each followed by values of 3 to 8); where it ends, and whether it
    held anything."""
    start = at
    while at < len(subtags) and _alphanum(subtags[at], 3, 8):
        at += 1
    while at < len(subtags) and len(subtags[at]) == 2:
        key = subtags[at]
        if not (key[0].isalnum() and key[1].isalpha()):
            break
        at += 1
        while at < len(subtags) and _alphanum(subtags[at], 3, 8):
            at += 1
    return at, at > start


def _transformed_extension(subtags: list[str], at: int) -> tuple[int, bool, str | None]:
    """``-t-``: an optional source language id, then fields (a letter and a digit, each
    followed by values of 3 to 8 letters or digits)."""
    start = at
    problem = None
    if at < len(subtags) and _language(subtags[at]):
        at, problem = _language_id(subtags, at + 1)
    while problem is None and at < len(subtags) and len(subtags[at]) == 2:
        key = subtags[at]
        if not (key[0].isalpha() and key[1].isdigit()):
            break
        values = at + 1
        while values < len(subtags) and _alphanum(subtags[values], 3, 8):
            values += 1
        if values == at + 1:
            break
        at = values
    return at, at > start, problem


def locale_problem(tag: str) -> str | None:
    """Why Chromium would refuse ``tag`` as a locale (None: it takes it). ``tag`` is
    letters, digits and hyphens (the field's pattern)."""
    subtags = tag.lower().split("-")
    if any(not subtag for subtag in subtags):
        return "a subtag is empty"
    if not _language(subtags[0]):
        return f"the language {tag.split('-')[0]!r} is 2 or 3 letters (en, de, fil)"
    at, problem = _language_id(subtags, 1)
    singletons: set[str] = set()
    while problem is None and at < len(subtags):
        singleton = subtags[at]
        if len(singleton) != 1:
            return f"{tag.split('-')[at]!r} does not fit where it is: {_ORDER}"
        if singleton in singletons:
            return f"the extension -{singleton}- is given twice"
        singletons.add(singleton)
        if singleton == "x":  # private use: the rest of the tag
            rest = subtags[at + 1 :]
            if rest and all(_alphanum(subtag, 1, 8) for subtag in rest):
                return None
            return "a private use part (-x-) needs subtags of 1 to 8 letters or digits"
        if singleton == "u":
            at, held = _unicode_extension(subtags, at + 1)
        elif singleton == "t":
            at, held, problem = _transformed_extension(subtags, at + 1)
        else:
            end = at + 1
            while end < len(subtags) and _alphanum(subtags[end], 2, 8):
                end += 1
            at, held = end, end > at + 1
        if problem is None and not held:
            problem = f"the extension -{singleton}- has nothing valid after it"
    return problem
