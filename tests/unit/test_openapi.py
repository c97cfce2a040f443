"""The API's OpenAPI document: generated from the routes, committed, and kept in step."""

from __future__ import annotations

import json
import re
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
    stage = document["servers"][0]["url"]  # the routes sit after the stage: /v1
    assert stage == "/v1"
    documented_routes = {(method.upper(), _params(stage + path)) for path, method, _ in operations}
    assert readme_routes() <= documented_routes, readme_routes() - documented_routes
    for path, method, op in operations:
        if path in ("/openapi.json", "/workflow.schema.json"):
            continue  # documents of their own (OpenAPI, JSON Schema), not API models
        success = [s for s in op["responses"] if s.startswith("2")]
        assert success, (path, method)
        for status in success:
            if status == "204" or (path, status) == ("/mcp", "202"):
                continue  # no body (MCP answers a notification 202 without one)
            schema = op["responses"][status]["content"]["application/json"]["schema"]
            assert schema["$ref"].startswith("#/components/schemas/"), (path, method, status)
        error = op["responses"]["422"]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/ErrorBody"}, (path, method)
    job = document["components"]["schemas"]["JobView"]["properties"]
    for name in ("attempts", "error", "artifacts", "result", "result_artifact", "status"):
        assert name in job
    submit = document["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert submit["schema"] == {"$ref": "#/components/schemas/JobSubmission"}


def readme_routes() -> set[tuple[str, str]]:
    """``(METHOD, /path)`` of every route the API reference's route table (docs/api.md) lists."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    found = re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/v1/[^`?]*)", readme, flags=re.M)
    return {(method, _params(path)) for method, path in found}


def _params(path: str) -> str:
    """``/v1/jobs/{job_id}`` and ``/v1/jobs/{id}`` name the same route."""
    return re.sub(r"\{[^}]+\}", "{}", path)
