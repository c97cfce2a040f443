"""Hiding a job's secret values in whatever it may echo: errors, events, results, logs.

The one home for masking: the worker builds one ``Masker`` per run from the secrets it
resolved (``browser_task.run.prepare``), and everything the run reports goes through it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MASK = "***"


def mask_secrets(text: str, secret_values: Iterable[str]) -> str:
    """Hide resolved secret values in text that may be echoed (errors, events, logs)."""
    for secret in sorted((s for s in secret_values if s), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


@dataclass(frozen=True)
class Masker:
    """The secret values of one run, longest first (a secret inside another is masked as
    part of the longer one)."""

    values: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str]) -> Masker:
        return cls(tuple(sorted({v for v in values if v}, key=len, reverse=True)))

    def with_values(self, values: Iterable[str]) -> Masker:
        """This masker and more values (a browser session resolves secrets as it goes)."""
        return Masker.of((*self.values, *values))

    def __bool__(self) -> bool:
        return bool(self.values)

    def text(self, text: str) -> str:
        for secret in self.values:
            text = text.replace(secret, MASK)
        return text

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
