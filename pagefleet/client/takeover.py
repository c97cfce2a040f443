"""The Python client's takeover calls: hold a running job's (or session's) page, send what a
person does on it, hand it back (docs/api.md, "Take over a page")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import httpx

from pagefleet.jobs.takeover import HandBack, TakeoverAnswer


class _Requests(Protocol):
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...


class TakeoverCalls:
    def take_over(self: _Requests, job_id: str) -> TakeoverAnswer:
        """Hold the page of a running job or browser session: its steps wait until
        ``hand_back`` (or until ``takeover.until`` passes without input). Again while held:
        renewed. ``ApiError`` 409 ``taken_over`` when another key holds it."""
        response = self._request("POST", f"/v1/jobs/{job_id}/takeover")
        return TakeoverAnswer.model_validate_json(response.content)

    def send_input(
        self: _Requests,
        job_id: str,
        takeover_id: str,
        events: Sequence[Mapping[str, Any]],
        *,
        frame: tuple[int, int],
    ) -> TakeoverAnswer:
        """Send input events (``click``, ``scroll``, ``key``, ``text``; coordinates in the
        pixels of a ``frame`` of (width, height)) to the held page, in order."""
        body = {
            "takeover_id": takeover_id,
            "frame": {"width": frame[0], "height": frame[1]},
            "events": [dict(e) for e in events],
        }
        response = self._request("POST", f"/v1/jobs/{job_id}/takeover/input", json=body)
        return TakeoverAnswer.model_validate_json(response.content)

    def hand_back(self: _Requests, job_id: str, takeover_id: str | None = None) -> HandBack:
        """Give the page back: the job's steps go on (``handed_back`` False when no one held
        it any more)."""
        params = {"takeover_id": takeover_id} if takeover_id else None
        response = self._request("DELETE", f"/v1/jobs/{job_id}/takeover", params=params)
        return HandBack.model_validate_json(response.content)
