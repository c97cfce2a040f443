"""Every 4xx and 5xx answer of the API."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pagefleet.view import View


class ErrorDetail(View):
    code: str = Field(description="machine-readable, e.g. validation_error, not_found")
    message: str
    field: str | None = Field(default=None, description="the field at fault, e.g. steps[0].url")
    details: list[dict[str, Any]] | None = None


class ErrorBody(View):
    """Every 4xx and 5xx answer of the API."""

    error: ErrorDetail
