"""The API's OpenAPI document: generated from the routes, committed, and kept in step."""

from __future__ import annotations

import json
from pathlib import Path

from functions.api.app import app
from functions.api.openapi import openapi_schema

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
REGENERATE = ".venv/bin/python -m functions.api > docs/openapi.json"


def test_committed_openapi_document_matches_the_routes() -> None:
    committed = json.loads(COMMITTED.read_text())
    assert committed == openapi_schema(app), (
        f"docs/openapi.json is out of date with the API's routes and models; run: {REGENERATE}"
    )


def test_every_operation_documents_its_bodies_and_errors() -> None:
    document = openapi_schema(app)
    assert document["openapi"].startswith("3.")
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    operations = [
        (path, method, op)
        for path, methods in document["paths"].items()
        for method, op in methods.items()
    ]
    assert len(operations) == 18  # the routes in the README's tables and this document
    for path, method, op in operations:
        if path == "/v1/openapi.json":
            continue
        success = [s for s in op["responses"] if s.startswith("2")]
        assert success, (path, method)
        for status in success:
            schema = op["responses"][status]["content"]["application/json"]["schema"]
            assert schema["$ref"].startswith("#/components/schemas/"), (path, method, status)
        error = op["responses"]["422"]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/ErrorBody"}, (path, method)
    job = document["components"]["schemas"]["JobView"]["properties"]
    for name in ("attempts", "error", "artifacts", "result", "result_artifact", "status"):
        assert name in job
    submit = document["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert submit["schema"] == {"$ref": "#/components/schemas/JobRequest"}
