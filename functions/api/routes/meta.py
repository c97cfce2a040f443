"""The API describing itself: its OpenAPI document."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from functions.api.context import json_document
from functions.api.openapi import openapi_schema

router = Router()


@router.get(
    "/openapi.json",
    summary="This API's OpenAPI 3 document",
    responses={200: {"description": "the OpenAPI document"}},
    tags=["meta"],
)
def openapi_document() -> Response[str]:
    # The resolver that included this router is the one to describe.
    resolver = router.api_resolver
    assert isinstance(resolver, APIGatewayRestResolver)
    return json_document(200, openapi_schema(resolver))
