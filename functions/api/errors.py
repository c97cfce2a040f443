"""Domain errors -> HTTP responses, in one place."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import Response

from pagefleet.errors import (
    EnqueueFailed,
    Forbidden,
    IdempotencyKeyReused,
    InvalidRequest,
    JobNotCancellable,
    NotFound,
    PagefleetError,
    Unauthorized,
)

STATUS_BY_ERROR: dict[type[PagefleetError], int] = {
    InvalidRequest: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    IdempotencyKeyReused: 409,
    JobNotCancellable: 409,
    EnqueueFailed: 503,
}


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    field: str | None = None,
    details: Iterable[Mapping[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response[str]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["field"] = field
    if details is not None:
        error["details"] = list(details)
    return Response(
        status_code=status,
        content_type="application/json",
        body=json.dumps({"error": error}),
        headers=dict(headers or {}),
    )


def from_domain(exc: PagefleetError) -> Response[str]:
    status = next((code for cls, code in STATUS_BY_ERROR.items() if isinstance(exc, cls)), 500)
    headers = {"Retry-After": "1"} if status == 503 else None
    extra = {k: v for k, v in exc.details.items() if k != "field" and v is not None}
    return error_response(
        status,
        exc.code,
        exc.message,
        field=exc.details.get("field"),
        details=[extra] if extra else None,
        headers=headers,
    )


def _field_path(loc: Iterable[Any]) -> str:
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "body"


def from_validation(errors: Iterable[Mapping[str, Any]]) -> Response[str]:
    """Pydantic errors as a list of {field, reason}; malformed JSON is its own 400."""
    items = list(errors)
    if any(e.get("type") == "json_invalid" for e in items):
        reason = next(
            (e.get("ctx", {}).get("error") for e in items if e.get("type") == "json_invalid"), None
        )
        return error_response(
            400, "invalid_json", f"request body is not valid JSON: {reason}", field="body"
        )
    details = [
        {"field": _field_path(e.get("loc", ())), "reason": str(e.get("msg", "invalid"))}
        for e in items
    ]
    first = details[0] if details else {"field": "body", "reason": "invalid"}
    return error_response(
        422,
        "validation_error",
        f"{first['field']}: {first['reason']}",
        field=first["field"],
        details=details,
    )
