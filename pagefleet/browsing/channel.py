"""How commands reach a session's worker and answers come back: the port, and its rules.

One command queue and one answer queue per session (docs/decisions.md, 2026-12-01). The
worker takes one command at a time; the API sends one and waits for the answer that names
it. An answer nobody asked for is handed on: one for a newer command (a concurrent caller)
is made visible again, one for an older command (its caller stopped waiting) is dropped.
"""

from __future__ import annotations

from typing import Protocol

from pagefleet.browsing.models import Answer, Command


class SessionChannel(Protocol):
    def open(self, channel: str) -> None:
        """Create the session's queues (idempotent)."""

    def close(self, channel: str) -> None:
        """Delete the session's queues (a missing one is not an error)."""

    def send_command(self, channel: str, command: Command) -> None: ...

    def next_command(self, channel: str, *, wait_s: int) -> Command | None:
        """The next command, taken off the queue; None after ``wait_s`` without one."""

    def send_answer(self, channel: str, answer: Answer) -> None: ...

    def await_answer(self, channel: str, command_id: str, *, timeout_s: float) -> Answer | None:
        """The answer to ``command_id``; None when none came within ``timeout_s``."""


class ChannelGone(Exception):
    """The session's queues are gone: the session ended."""


def answer_fate(answer_id: str, waiting_for: str) -> str:
    """What a caller waiting for ``waiting_for`` does with an answer: ``take`` it, ``drop``
    it (an older command's, whose caller gave up) or ``release`` it (a newer command's).
    Command ids are ULIDs: they sort by the time they were made."""
    if answer_id == waiting_for:
        return "take"
    return "drop" if answer_id < waiting_for else "release"
