"""The API's OpenAPI 3 document, generated from the resolver's routes and models.

Served at ``GET /v1/openapi.json`` and committed as ``docs/openapi.json``; regenerate with

    .venv/bin/python -m functions.api.openapi > docs/openapi.json
"""

from __future__ import annotations

import functools
import json
from typing import Any

from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

TITLE = "pagefleet API"
VERSION = "1"
DESCRIPTION = (
    "Submit browser jobs (declarative Playwright workflows), follow them, fetch their "
    "results and artifacts. Every request carries `Authorization: Bearer <API key>`. "
    "Request bodies are JSON, whatever Content-Type is sent. Every error is "
    '`{"error": {"code", "message", "field"?, "details"?}}` with a 4xx naming the field '
    "for anything wrong with the request."
)


@functools.cache
def openapi_schema() -> dict[str, Any]:
    from functions.api.app import app

    document: dict[str, Any] = json.loads(
        app.get_openapi_json_schema(
            title=TITLE,
            version=VERSION,
            description=DESCRIPTION,
            security_schemes={"bearer": HTTPBearer(description="pagefleet API key")},
            security=[{"bearer": []}],
        )
    )
    return document


def render() -> str:
    return json.dumps(openapi_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render(), end="")
