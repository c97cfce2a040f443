"""The Python client's browser-session calls (mixed into ``PagefleetClient``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import httpx

from pagefleet.browsing.models import SavedWorkflow, SessionView, StepsAnswer


class _Requests(Protocol):
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...


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
    ) -> StepsAnswer:
        """Run one step (a mapping) or a list in the session; the outcome and observation.
        ``aria``: whether to observe the ARIA snapshot, or how ({scope, max_chars, diff})."""
        view = aria if isinstance(aria, bool) else dict(aria)
        body: dict[str, Any] = {"observe": {"screenshot": screenshot, "aria": view}}
        if isinstance(steps, Mapping):
            body["step"] = dict(steps)
        else:
            body["steps"] = [dict(s) for s in steps]
        path = f"/v1/browser-sessions/{session_id}/steps"
        return StepsAnswer.model_validate(self._request("POST", path, json=body).json())

    def get_session(self: _Requests, session_id: str) -> SessionView:
        """A browser session: its state, its steps so far and their answers."""
        path = f"/v1/browser-sessions/{session_id}"
        return SessionView.model_validate(self._request("GET", path).json())

    def close_session(self: _Requests, session_id: str) -> SessionView:
        """Close a browser session (idempotent): its slot is released at once."""
        path = f"/v1/browser-sessions/{session_id}"
        return SessionView.model_validate(self._request("DELETE", path).json())

    def save_session(
        self: _Requests,
        session_id: str,
        name: str,
        inputs: Mapping[str, Any] | None = None,
        description: str | None = None,
    ) -> SavedWorkflow:
        """The session's successful steps as the next version of workflow ``name`` (a
        workflow, not a login: the ``save_session`` step is what saves a login)."""
        body: dict[str, Any] = {"name": name, "inputs": dict(inputs or {})}
        if description is not None:
            body["description"] = description
        path = f"/v1/browser-sessions/{session_id}/save-as-workflow"
        return SavedWorkflow.model_validate(self._request("POST", path, json=body).json())
