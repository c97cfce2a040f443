"""The API describing itself: its health and release, its OpenAPI document, the JSON Schema
of a job request."""

from __future__ import annotations

import functools
import json

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

import pagefleet
from functions.api.context import api_settings, documented, json_document, respond
from functions.api.openapi import openapi_schema
from pagefleet.api.meta import HealthView
from pagefleet.jobs.submission import submission_schema

SCHEMA_MEDIA_TYPE = "application/schema+json"
SCHEMA_RESPONSES = {
    200: OpenAPIResponse(
        description="the JSON Schema", content={SCHEMA_MEDIA_TYPE: {"schema": {"type": "object"}}}
    ),
    **documented({}),
}

router = Router()


@router.get(
    "/health",
    summary="The API answers: the pagefleet release deployed and the stage",
    description=(
        "Public: no API key needed. For load balancers, uptime checks and an operator "
        "checking which release a stage runs after a deploy or a rollback."
    ),
    responses={
        status: answer
        for status, answer in documented({200: ("the API answers", HealthView)}).items()
        if status != 401
    },
    tags=["meta"],
)
def health() -> Response[str]:
    view = HealthView(status="ok", version=pagefleet.__version__, stage=api_settings().stage)
    return respond(200, view, {"Cache-Control": "no-store"})


@router.get(
    "/openapi.json",
    summary="This API's OpenAPI 3 document",
    description="Public: no API key needed.",
    responses={
        200: {
            "description": "the OpenAPI document",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        **{status: answer for status, answer in documented({}).items() if status != 401},
    },
    tags=["meta"],
)
def openapi_document() -> Response[str]:
    # The resolver that included this router is the one to describe.
    resolver = router.api_resolver
    assert isinstance(resolver, APIGatewayRestResolver)
    return json_document(200, openapi_schema(resolver))


@router.get(
    "/workflow.schema.json",
    summary="The JSON Schema (draft 2020-12) of a job request, the body of POST /v1/jobs",
    description=(
        "For editors: steps, workflow, inputs, options, priority, delay_seconds, run_at, "
        "depends_on, name... The checks that need your data (a named workflow exists, its "
        "inputs fit) are `POST /v1/jobs/validate`'s."
    ),
    responses=SCHEMA_RESPONSES,
    tags=["meta"],
)
def workflow_schema() -> Response[str]:
    return Response(
        status_code=200,
        content_type=SCHEMA_MEDIA_TYPE,
        body=_schema_text(),
        headers={"Cache-Control": "private, max-age=300"},
    )


@functools.cache
def _schema_text() -> str:
    # Once a process: the models never change while it runs.
    return json.dumps(submission_schema(), separators=(",", ":"), ensure_ascii=False)
