"""The Python client's browser-session calls (mixed into ``PagefleetClient``)."""

from __future__ import annotations

import hashlib
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import httpx

from pagefleet.browsing.models import (
    DEFAULT_WAIT_S,
    CommandView,
    OpenSessions,
    OpenSessionView,
    SavedWorkflow,
    SessionFile,
    SessionFiles,
    SessionView,
    StepsAnswer,
)
from pagefleet.jobs.models import new_ulid

# How long session_steps reads a command that answered 202 before it gives up, and how
# often: every POLL_FIRST_S for the first FAST_FOR_S (a session starting takes about that,
# and its first step should not wait for a slow read), then doubling to the longest.
DEFAULT_GIVE_UP_S = 300.0
POLL_FIRST_S = 0.05
FAST_FOR_S = 3.0
POLL_MAX_S = 0.5


class CommandPending(Exception):
    """The command has no answer yet (or its worker went while it ran): read it later
    with ``get_command(session_id, command_id)``; it runs at most once whatever happens."""

    def __init__(self, view: CommandView) -> None:
        super().__init__(f"command {view.command_id} is {view.state}")
        self.view = view


def steps_body(
    steps: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    screenshot: bool,
    aria: bool | Mapping[str, Any],
    wait_s: int | None,
) -> dict[str, Any]:
    # ``aria``: whether to observe the ARIA snapshot, or how ({scope, max_chars, diff}).
    view = aria if isinstance(aria, bool) else dict(aria)
    body: dict[str, Any] = {"observe": {"screenshot": screenshot, "aria": view}}
    if isinstance(steps, Mapping):
        body["step"] = dict(steps)
    else:
        body["steps"] = [dict(s) for s in steps]
    if wait_s is not None:
        body["wait_s"] = wait_s
    return body


class _Requests(Protocol):
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

    def download(self, url: str) -> bytes: ...


class BrowsingCalls:
    def open_session(
        self: _Requests,
        *,
        options: Mapping[str, Any] | None = None,
        use_session: str | None = None,
        idle_timeout_s: int | None = None,
        max_duration_s: int | None = None,
    ) -> SessionView:
        body: dict[str, Any] = {"options": dict(options or {})}
        given = {
            "use_session": use_session,
            "idle_timeout_s": idle_timeout_s,
            "max_duration_s": max_duration_s,
        }
        body.update({k: v for k, v in given.items() if v is not None})
        return SessionView.model_validate(
            self._request("POST", "/v1/browser-sessions", json=body).json()
        )

    def session_steps(
        self: _Requests,
        session_id: str,
        steps: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        screenshot: bool = False,
        aria: bool | Mapping[str, Any] = True,
        command_id: str | None = None,
        wait_s: int | None = None,
        deadline_s: int | None = None,
        give_up_s: float = DEFAULT_GIVE_UP_S,
    ) -> StepsAnswer:
        """Run one step (a mapping) or a list in the session; the outcome and observation
        (``aria``: whether to observe the ARIA snapshot, or how: {scope, max_chars, diff}).

        The command's id is made here (or given): a call sent again, by this client's
        retry or the caller's, is answered from the first, never run twice. When the API
        answers 202 (still running past ``wait_s``), the command is read until it has
        its answer, for at most ``give_up_s`` (then :class:`CommandPending`): each read of
        a running command waits for its answer as the call did (``wait_s``; with
        ``wait_s=0`` no call waits, the reads included)."""
        sent = BrowsingCalls.send_steps(
            self,
            session_id,
            steps,
            screenshot=screenshot,
            aria=aria,
            command_id=command_id,
            wait_s=wait_s,
            deadline_s=deadline_s,
        )
        if isinstance(sent, StepsAnswer):
            return sent
        sent_at = time.monotonic()
        give_up = sent_at + give_up_s
        pause = POLL_FIRST_S
        hold = DEFAULT_WAIT_S if wait_s is None else wait_s
        while time.monotonic() < give_up:
            time.sleep(pause)
            left = int(give_up - time.monotonic())
            view = BrowsingCalls.get_command(
                self, session_id, sent.command_id, wait_s=max(0, min(hold, left))
            )
            if view.answer is not None:
                return view.answer
            if view.state == "lost":
                raise CommandPending(view)
            if time.monotonic() - sent_at >= FAST_FOR_S:
                pause = min(POLL_MAX_S, pause * 2)
        raise CommandPending(sent)

    def send_steps(
        self: _Requests,
        session_id: str,
        steps: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        screenshot: bool = False,
        aria: bool | Mapping[str, Any] = True,
        command_id: str | None = None,
        wait_s: int | None = None,
        deadline_s: int | None = None,
    ) -> StepsAnswer | CommandView:
        """Send the steps once: the answer (200), or the command still to be answered
        (202; read it with :meth:`get_command`). ``wait_s=0`` never waits."""
        body = steps_body(steps, screenshot=screenshot, aria=aria, wait_s=wait_s)
        body["command_id"] = command_id or new_ulid()
        if deadline_s is not None:
            body["deadline_s"] = deadline_s
        path = f"/v1/browser-sessions/{session_id}/steps"
        # Its command_id makes it safe to send again: run once, or answered as the first.
        response = self._request("POST", path, json=body, safe=True)
        if response.status_code == 202:
            return CommandView.model_validate(response.json())
        return StepsAnswer.model_validate(response.json())

    def get_command(
        self: _Requests, session_id: str, command_id: str, *, wait_s: int = 0
    ) -> CommandView:
        """A command of the session: pending, running, or with its answer. ``wait_s``: a
        command found running is read until its answer, for at most that long (0: the call
        holds nothing)."""
        path = f"/v1/browser-sessions/{session_id}/commands/{command_id}"
        params = {"wait_s": wait_s} if wait_s else None
        return CommandView.model_validate(self._request("GET", path, params=params).json())

    def answer_part(self: _Requests, answer: StepsAnswer, name: str) -> bytes:
        """A part of an answer too large to come inline (``result``: the extracted data as
        JSON; ``aria_snapshot``: the whole tree), checked against its sha256."""
        part = answer.parts[name]
        data = self.download(part.url)
        digest = hashlib.sha256(data).hexdigest()
        if digest != part.sha256:
            raise ValueError(f"answer part {name}: sha256 {digest} differs from {part.sha256}")
        return data

    def open_sessions(self: _Requests, status: str = "open") -> list[OpenSessionView]:
        """The tenant's sessions still open (``starting``, ``ready``, or ``open``: both),
        newest first, each with its cost so far and its last activity."""
        got = self._request("GET", "/v1/browser-sessions", params={"status": status})
        return OpenSessions.model_validate(got.json()).sessions

    def session_files(self: _Requests, session_id: str) -> list[SessionFile]:
        """The files the session's steps made (downloads, named screenshots, pdfs), oldest
        first, each with a short presigned link (:meth:`download` reads it)."""
        path = f"/v1/browser-sessions/{session_id}/files"
        return SessionFiles.model_validate(self._request("GET", path).json()).files

    def get_session(self: _Requests, session_id: str) -> SessionView:
        """A browser session: its state, its steps so far and their answers."""
        path = f"/v1/browser-sessions/{session_id}"
        return SessionView.model_validate(self._request("GET", path).json())

    def close_session(self: _Requests, session_id: str) -> SessionView:
        """Close a browser session (idempotent). One not started yet is closed at once; a
        running one is ended by its worker, so the answer may still read ``ready``: read
        the session again for ``closed``."""
        path = f"/v1/browser-sessions/{session_id}"
        return SessionView.model_validate(self._request("DELETE", path).json())

    def save_as_workflow(
        self: _Requests,
        session_id: str,
        name: str,
        inputs: Mapping[str, Any] | None = None,
        description: str | None = None,
    ) -> SavedWorkflow:
        """The browser session's successful steps as the next version of workflow ``name``
        (a workflow, not a saved login: the ``save_session`` step is what saves a login)."""
        body: dict[str, Any] = {"name": name, "inputs": dict(inputs or {})}
        if description is not None:
            body["description"] = description
        path = f"/v1/browser-sessions/{session_id}/save-as-workflow"
        return SavedWorkflow.model_validate(self._request("POST", path, json=body).json())

    def save_session(
        self: _Requests,
        session_id: str,
        name: str,
        inputs: Mapping[str, Any] | None = None,
        description: str | None = None,
    ) -> SavedWorkflow:
        """Deprecated: ``save_as_workflow`` (the name read as saving a login)."""
        warnings.warn(
            "PagefleetClient.save_session is save_as_workflow: it saves a workflow, not a login",
            DeprecationWarning,
            stacklevel=2,
        )
        return BrowsingCalls.save_as_workflow(self, session_id, name, inputs, description)
