"""The API describing itself: its OpenAPI document."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from functions.api.context import json_document

router = Router()


@router.get(
    "/v1/openapi.json",
    summary="This API's OpenAPI 3 document",
    responses={200: {"description": "the OpenAPI document"}},
    tags=["meta"],
)
def openapi_document() -> Response[str]:
    from functions.api.openapi import openapi_schema  # the resolver includes this router

    return json_document(200, openapi_schema())
