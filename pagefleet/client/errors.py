"""What the client raises when the API refuses a request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from pagefleet.client.retries import retry_after_s


class ApiError(Exception):
    """The API refused a request. ``details`` lists ``{"field", "reason"}`` for validation."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
        *,
        field: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        self.field = field
        self.retry_after = retry_after

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        code, message, field, details = (
            f"http_{response.status_code}",
            response.reason_phrase,
            None,
            None,
        )
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if isinstance(payload, Mapping):
            error = payload.get("error")
            if isinstance(error, Mapping):
                code = str(error.get("code") or code)
                message = str(error.get("message") or message)
                field = error.get("field")
                raw = error.get("details")
                details = (
                    [dict(d) for d in raw if isinstance(d, Mapping)]
                    if isinstance(raw, list)
                    else None
                )
            elif "message" in payload:  # API Gateway without our gateway responses: {"message"}
                message = str(payload.get("message") or message)
                code = {401: "unauthorized", 403: "forbidden", 413: "request_too_large"}.get(
                    response.status_code, code
                )
        return cls(
            response.status_code,
            code,
            message,
            details,
            field=field,
            retry_after=retry_after_s(response),
        )
