"""Domain errors -> HTTP responses, in one place."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import Response
from botocore.exceptions import BotoCoreError, ClientError

from pagefleet.api.errors import ErrorBody, ErrorDetail
from pagefleet.errors import (
    EnqueueFailed,
    Forbidden,
    IdempotencyKeyReused,
    InvalidField,
    InvalidRequest,
    JobNotCancellable,
    JobNotEnded,
    JobNotInReview,
    JobNotRunning,
    JobNotWaiting,
    NotConfigured,
    NotFound,
    PagefleetError,
    RequestTooLarge,
    SessionEnded,
    StoreBusy,
    TakenOver,
    TakeoverNotHeld,
    TooManyRequests,
    Unauthorized,
)

# Checked in order: a subclass before its base.
STATUS_BY_ERROR: dict[type[PagefleetError], int] = {
    RequestTooLarge: 413,
    InvalidField: 422,
    InvalidRequest: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    IdempotencyKeyReused: 409,
    JobNotCancellable: 409,
    JobNotInReview: 409,
    JobNotWaiting: 409,
    JobNotRunning: 409,
    TakenOver: 409,
    TakeoverNotHeld: 409,
    JobNotEnded: 409,
    SessionEnded: 409,
    TooManyRequests: 429,
    EnqueueFailed: 503,
    StoreBusy: 503,
    NotConfigured: 501,
}


def error_body(
    code: str,
    message: str,
    *,
    field: str | None = None,
    details: Iterable[Mapping[str, Any]] | None = None,
) -> str:
    detail = ErrorDetail(
        code=code,
        message=message,
        field=field,
        details=[dict(d) for d in details] if details is not None else None,
    )
    return ErrorBody(error=detail).model_dump_json(exclude_none=True)


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    field: str | None = None,
    details: Iterable[Mapping[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response[str]:
    return Response(
        status_code=status,
        content_type="application/json",
        body=error_body(code, message, field=field, details=details),
        headers=dict(headers or {}),
    )


def proxy_error(status: int, code: str, message: str, *, field: str) -> dict[str, Any]:
    """An error answered by the entry point itself (before the resolver), as a proxy result."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "isBase64Encoded": False,
        "body": error_body(code, message, field=field),
    }


# AWS answers that say "not now" rather than "never": the client may retry the same request.
_TRANSIENT_AWS_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return error.get("Code") in _TRANSIENT_AWS_CODES or int(status or 0) >= 500
    return isinstance(exc, BotoCoreError)  # connection refused, timed out, reset


def internal_error(exc: BaseException, request_id: str | None) -> Response[str]:
    """A fault of ours, never of the request: the client gets the request id to quote, never
    internals, and is told to retry only when AWS was briefly unavailable."""
    ref = f" (request id {request_id})" if request_id else ""
    if is_transient(exc):
        return error_response(
            503,
            "service_unavailable",
            f"a backing service is briefly unavailable; retry the same request{ref}",
            headers={"Retry-After": "1"},
        )
    return error_response(500, "internal_error", f"internal error{ref}")


def status_of(exc: PagefleetError) -> int:
    return next((code for cls, code in STATUS_BY_ERROR.items() if isinstance(exc, cls)), 500)


def error_detail(exc: PagefleetError) -> ErrorDetail:
    """A domain error as the API answers it: code, message, the field, and the details (a
    list of {field, reason}, as validation gives, or the error's other facts)."""
    listed = exc.details.get("details")
    extra = {
        k: v for k, v in exc.details.items() if k not in ("field", "details") and v is not None
    }
    return ErrorDetail(
        code=exc.code,
        message=exc.message,
        field=exc.details.get("field"),
        details=listed if isinstance(listed, list) else ([extra] if extra else None),
    )


def from_domain(exc: PagefleetError) -> Response[str]:
    status = status_of(exc)
    headers = {"Retry-After": "1"} if status == 503 else None
    if isinstance(exc, TooManyRequests):
        headers = exc.headers  # Retry-After and the RateLimit-* fields
    detail = error_detail(exc)
    return error_response(
        status,
        detail.code,
        detail.message,
        field=detail.field,
        details=detail.details,
        headers=headers,
    )


# Where a request error sits: the resolver's locations start with the part of the request.
_REQUEST_PARTS = ("body", "query", "path", "header")


def from_validation(errors: Iterable[Mapping[str, Any]]) -> Response[str]:
    """The resolver's request validation errors as the one field error (422), each field
    named within its part of the request; malformed JSON is its own 400."""
    items = list(errors)
    if any(e.get("type") == "json_invalid" for e in items):
        reason = next(
            (e.get("ctx", {}).get("error") for e in items if e.get("type") == "json_invalid"), None
        )
        return error_response(
            400, "invalid_json", f"request body is not valid JSON: {reason}", field="body"
        )
    return from_domain(InvalidField.from_errors([_in_part(e) for e in items]))


def _in_part(error: Mapping[str, Any]) -> Mapping[str, Any]:
    loc = tuple(error.get("loc", ()))
    return {**error, "loc": loc[1:]} if loc and loc[0] in _REQUEST_PARTS else error
