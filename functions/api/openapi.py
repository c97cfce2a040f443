"""The API's OpenAPI 3 document, generated from the resolver's routes and models.

Served at ``GET /v1/openapi.json`` and committed as ``docs/openapi.json``; regenerate with

    .venv/bin/python -m functions.api > docs/openapi.json
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

import pagefleet
from pagefleet.specs.gateway import PUBLIC_ROUTES
from pagefleet.specs.resources import API_STAGE

_DOCUMENTS: dict[int, dict[str, Any]] = {}
TITLE = "pagefleet API"
# The release (CHANGELOG.md); the stage in the URL (/v1) is the API's compatibility version.
VERSION = pagefleet.__version__
DESCRIPTION = (
    "Submit browser jobs (declarative Playwright workflows), follow them, fetch their "
    "results and artifacts. Every request carries `Authorization: Bearer <API key>`. "
    "Request bodies are JSON, whatever Content-Type is sent. Every error is "
    '`{"error": {"code", "message", "field"?, "details"?}}` with a 4xx naming the field '
    "for anything wrong with the request."
)


def openapi_schema(app: APIGatewayRestResolver) -> dict[str, Any]:
    """The document of ``app`` (built once per resolver: the routes never change)."""
    cached = _DOCUMENTS.get(id(app))
    if cached is not None:
        return cached
    # Powertools' OpenAPI models take ~0.1 s to build: only the document's route pays it.
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, Server

    document: dict[str, Any] = json.loads(
        app.get_openapi_json_schema(
            title=TITLE,
            version=VERSION,
            description=DESCRIPTION,
            security_schemes={"bearer": HTTPBearer(description="pagefleet API key")},
            security=[{"bearer": []}],
            # The stage is the version: https://<api>/v1/jobs (the routes below are after it).
            servers=[Server(url=f"/{API_STAGE}", description="the API's stage (its version)")],
        )
    )
    for operations in document["paths"].values():
        for operation in operations.values():
            for answer in operation["responses"].values():
                if answer.get("content") == {}:
                    del answer["content"]  # no body at all (a 204), not an empty one
    for method, path in PUBLIC_ROUTES:
        # No key: API Gateway's method for it has no authorizer (pagefleet/specs/gateway.py).
        document["paths"][path][method.lower()]["security"] = []
    _DOCUMENTS[id(app)] = document
    return document


def render(app: APIGatewayRestResolver) -> str:
    return json.dumps(openapi_schema(app), indent=2, ensure_ascii=False) + "\n"
