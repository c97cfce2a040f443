"""Hiding a job's secret values in whatever it may echo: errors, events, results, logs.

The one home for masking: the worker builds one ``Masker`` per run from the secrets it
resolved (``browser_task.run.prepare``), and everything the run reports goes through it.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

MASK = "***"

# Percent-encodings that encode everything but ASCII letters, digits and these (and send
# spaces as ``+`` or ``%20``): RFC 3986's unreserved characters (Python's quote), the same
# with ``/`` kept, JavaScript's encodeURIComponent, and HTML forms
# (application/x-www-form-urlencoded: how a form GET puts a field into the URL).
_KEEPING = ("-._~", "/-._~", "-_.!~*'()", "*-._")
# Percent-encodings that encode only non-ASCII, controls and these: how a browser's URL
# parser writes what was typed into a URL's query, a special scheme's query, and its path
# (the WHATWG URL standard's percent-encode sets).
_ONLY = (' "#<>', " \"#<>'", ' "#<>?`{}')
# The bytes percent-encoded: UTF-8, and windows-1252, which a form on a page that declares
# no charset submits in (HTML's default legacy encoding for Western locales).
_CHARSETS = ("utf-8", "cp1252")


def encoded_forms(secret: str) -> set[str]:
    """A secret as a page, a URL or an HTML document may carry it: as it is, percent-encoded
    as the common encoders and browsers' URL parsers write it (of its UTF-8 or its
    windows-1252 bytes, hex digits in either case, spaces as ``+`` or ``%20``), and
    HTML-escaped."""
    forms = {secret, html.escape(secret), html.escape(secret, quote=False)}
    keeps: list[Callable[[str], bool]] = [
        *(lambda c, keep=keep: c.isascii() and (c.isalnum() or c in keep) for keep in _KEEPING),
        *(lambda c, only=only: c.isascii() and c.isprintable() and c not in only for only in _ONLY),
    ]
    encoded: set[str] = set()
    for charset in _CHARSETS:
        try:
            secret.encode(charset)
        except UnicodeEncodeError:
            continue
        encoded |= {_percent(secret, kept, charset) for kept in keeps}
    for form in encoded:
        lower = _lower_hex(form)
        forms |= {form, form.replace("%20", "+"), lower, lower.replace("%20", "+")}
    return {form for form in forms if form}


def _percent(text: str, kept: Callable[[str], bool], charset: str) -> str:
    return "".join(c if kept(c) else "".join(f"%{b:02X}" for b in c.encode(charset)) for c in text)


def _lower_hex(encoded: str) -> str:
    head, *escapes = encoded.split("%")
    return "%".join([head, *(e[:2].lower() + e[2:] for e in escapes)])


def mask_secrets(text: str, secret_values: Iterable[str]) -> str:
    """Hide resolved secret values, and their encoded forms, in text that may be echoed
    (errors, events, logs)."""
    return Masker.of(secret_values).text(text)


@dataclass(frozen=True)
class Masker:
    """The secret values of one run and every form they are masked in, longest first (a
    secret inside another is masked as part of the longer one)."""

    values: tuple[str, ...] = ()
    forms: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str]) -> Masker:
        secrets = sorted({v for v in values if v})
        forms = {form for secret in secrets for form in encoded_forms(secret)}
        return cls(tuple(secrets), tuple(sorted(forms, key=lambda f: (-len(f), f))))

    def with_values(self, values: Iterable[str]) -> Masker:
        """This masker and more values (a browser session resolves secrets as it goes)."""
        return Masker.of((*self.values, *values))

    def __bool__(self) -> bool:
        return bool(self.values)

    def text(self, text: str) -> str:
        for form in self.forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def bytes(self, data: bytes) -> bytes:
        """Every form masked in raw bytes (a recorded body of any type), as UTF-8 or
        windows-1252 text would carry it."""
        for form in self.forms:
            for charset in _CHARSETS:
                try:
                    raw = form.encode(charset)
                except UnicodeEncodeError:
                    continue
                if raw in data:
                    data = data.replace(raw, MASK.encode())
        return data

    def value(self, value: Any) -> Any:
        """Every string inside a JSON-like value masked (a page may echo a secret back)."""
        if not self.values:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value
