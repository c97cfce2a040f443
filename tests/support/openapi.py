"""Real answers checked against the committed OpenAPI document (docs/openapi.json) with
openapi-core: a validator that is not the one that wrote the document (Powertools)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DOCUMENT.read_text())
    return loaded


def validator(spec: dict[str, Any]) -> Callable[[str, str, httpx.Response], None]:
    """``validate(method, path, response)``: raises naming what differs from ``spec``."""
    from openapi_core import Config, OpenAPI
    from openapi_core.testing import MockRequest, MockResponse

    # The JSON Schema's media type is JSON too (RFC 6839's +json suffix).
    config = Config(extra_media_type_deserializers={"application/schema+json": json.loads})
    api = OpenAPI.from_dict(spec, config=config)

    def validate(method: str, path: str, response: httpx.Response) -> None:
        request = MockRequest("http://127.0.0.1", method.lower(), path.split("?")[0])
        media_type = (response.headers.get("Content-Type") or "").split(";")[0] or None
        answer = MockResponse(
            response.content, status_code=response.status_code, content_type=media_type
        )
        api.validate_response(request, answer)

    return validate
