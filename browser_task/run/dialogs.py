"""The page's dialogs (alert, confirm, prompt, beforeunload): answered, checked, reported.

Without a listener Playwright dismisses every dialog silently (``confirm()`` is false,
``prompt()`` null), so a "Delete? OK" flow could not be automated and nobody saw why. The
run listens instead: a dialog a ``dialog`` step expects gets that step's answer, any other
the job's ``options.dialogs``; each is a run event. The page is frozen while a dialog is
open (the step that opened it waits too), so the answer is given as the dialog opens, and
a mismatch (message, kind) is found then and raised at the next step boundary. A browser
session's observation says which dialogs came since the last one, what they said and how
they were answered (``drain``): an agent cannot see a dialog any other way.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from playwright.async_api import Dialog as PageDialog
from playwright.async_api import Error as PlaywrightError

from browser_task.errors import FailJob
from browser_task.observe.run_events import RunEvents
from pagefleet.jobs.options import JobOptions
from pagefleet.live.events import EventType
from pagefleet.workflow import Dialog

# The dialogs an observation reports at most (the latest; a page that loops on alert()
# must not grow the answer).
MAX_REPORTED = 10


@dataclass(frozen=True)
class Expected:
    step: Dialog
    index: int | None  # the dialog step's top-level index


class DialogWatch:
    """One attempt's dialogs: what the next one gets, what went wrong with one."""

    def __init__(
        self, options: JobOptions, events: RunEvents | None, mask: Callable[[str], str]
    ) -> None:
        self._accept = options.dialogs == "accept"
        self._prompt_text = options.prompt_text
        self._events = events
        self._mask = mask
        self.expected: Expected | None = None
        # Why the last expected dialog was not the one expected (raised by the step loop).
        self._problem: str | None = None
        self.seen = 0
        self._recent: deque[dict[str, Any]] = deque(maxlen=MAX_REPORTED)

    @classmethod
    def listening(
        cls,
        options: JobOptions,
        events: RunEvents | None,
        mask: Callable[[str], str],
        page: Any,
        listeners: list[tuple[str, Callable[..., Any]]],
    ) -> DialogWatch:
        """A watch already listening on ``page``'s context."""
        watch = cls(options, events, mask)
        watch.install(page, listeners)
        return watch

    def install(self, page: Any, listeners: list[tuple[str, Callable[..., Any]]]) -> None:
        """Listen on the context: every tab's dialogs are answered and reported, a popup's
        that opens with an alert too (a listener added on the new tab would come after it:
        Playwright dismisses a dialog nobody listens for, unseen). Noted in ``listeners``:
        a warm context outlives the job."""
        page.context.on("dialog", self.on_dialog)
        listeners.append(("dialog", self.on_dialog))

    def drain(self) -> list[dict[str, Any]]:
        """The dialogs that came since the last drain (kind, message masked, answer)."""
        out = list(self._recent)
        self._recent.clear()
        return out

    def expect(self, step: Dialog, index: int | None) -> None:
        """A ``dialog`` step: the next dialog is this step's."""
        if self.expected is not None:
            raise FailJob(
                f"{self._name(self.expected)} expected a dialog, and none came before this "
                "dialog step",
                kind="assertion_failed",
            )
        self.expected = Expected(step, index)

    def raise_problem(self) -> None:
        """After each step: fail the run when a dialog was not the one expected."""
        problem, self._problem = self._problem, None
        if problem is not None:
            raise FailJob(problem, kind="assertion_failed")

    def unmet(self) -> Expected | None:
        """The dialog step whose dialog never came (checked when the steps end)."""
        return self.expected

    async def on_dialog(self, dialog: PageDialog) -> None:
        expected, self.expected = self.expected, None
        kind, message = dialog.type, dialog.message
        self.seen += 1
        if expected is None:
            accept, text, why = self._accept, self._prompt_text, None
        else:
            step = expected.step
            why = self._mismatch(step, kind, message)
            # A dialog that is not the one expected is dismissed, never confirmed: the
            # "OK" was meant for another question.
            accept, text = step.accept and why is None, step.prompt_text
            if why is not None:
                self._problem = f"{self._name(expected)}: {why}"
        said = {"type": kind, "message": self._mask(message)}
        if kind == "prompt" and accept:
            said["prompt_text"] = self._mask(text if text is not None else dialog.default_value)
        self._recent.append({**said, "answer": "accepted" if accept else "dismissed"})
        if self._events is not None:
            self._events.emit(
                EventType.DIALOG,
                dialog=kind,
                message=message,
                outcome="accepted" if accept else "dismissed",
                index=expected.index if expected is not None else None,
            )
        with contextlib.suppress(PlaywrightError):  # the page may be closing
            if accept and kind == "prompt":
                await dialog.accept(text if text is not None else dialog.default_value)
            elif accept:
                await dialog.accept()
            else:
                await dialog.dismiss()

    def _mismatch(self, step: Dialog, kind: str, message: str) -> str | None:
        if step.type is not None and kind != step.type:
            return f"expected a {step.type} dialog, a {kind} came ({message!r})"
        if step.message_contains is not None and step.message_contains not in message:
            return (
                f"the dialog's message {self._mask(message)!r} does not contain "
                f"{step.message_contains!r}"
            )
        return None

    @staticmethod
    def _name(expected: Expected) -> str:
        return "the dialog step" + (f" at {expected.index}" if expected.index is not None else "")
