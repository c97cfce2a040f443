"""API Gateway REST (v1, Lambda proxy) event shapes, as AWS documents them."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any
from urllib.parse import parse_qs

RESOURCES = ("/v1/jobs/{job_id}/artifacts", "/v1/jobs/{job_id}", "/v1/jobs")


def _match(path: str) -> tuple[str, dict[str, str] | None]:
    parts = path.strip("/").split("/")
    for resource in RESOURCES:
        tpl = resource.strip("/").split("/")
        if len(tpl) != len(parts):
            continue
        params: dict[str, str] = {}
        for t, p in zip(tpl, parts, strict=True):
            if t.startswith("{"):
                params[t[1:-1]] = p
            elif t != p:
                break
        else:
            return resource, params or None
    return path, None


def rest_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    query: str = "",
    authorizer: dict[str, str] | None = None,
    raw_body: bytes | None = None,
) -> dict[str, Any]:
    """``raw_body`` sends exact bytes (base64-encoded when they are not UTF-8, as API
    Gateway does), for the tests of bodies no JSON encoder would produce."""
    resource, path_params = _match(path)
    hdrs = {"Content-Type": "application/json", "Host": "api.example.test", **(headers or {})}
    is_b64 = False
    text: str | None = body if isinstance(body, str) or body is None else json.dumps(body)
    if raw_body is not None:
        try:
            text = raw_body.decode("utf-8")
        except UnicodeDecodeError:
            text, is_b64 = base64.b64encode(raw_body).decode(), True
    mv_query = parse_qs(query, keep_blank_values=True) if query else None
    request_id = str(uuid.uuid4())
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": hdrs,
        "multiValueHeaders": {k: [v] for k, v in hdrs.items()},
        "queryStringParameters": {k: v[-1] for k, v in mv_query.items()} if mv_query else None,
        "multiValueQueryStringParameters": mv_query,
        "pathParameters": path_params,
        "stageVariables": None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abcdef1234",
            "resourceId": "res123",
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"/prod{path}",
            "stage": "prod",
            "requestId": request_id,
            "extendedRequestId": request_id,
            "protocol": "HTTP/1.1",
            "requestTime": "30/Nov/2026:06:00:00 +0000",
            "requestTimeEpoch": 1796018400000,
            "identity": {"sourceIp": "127.0.0.1", "userAgent": "pytest"},
            "authorizer": authorizer,
            "domainName": "api.example.test",
        },
        "body": text,
        "isBase64Encoded": is_b64,
    }


def token_event(token: str | None, method: str = "GET", path: str = "/v1/jobs") -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "TOKEN",
        "methodArn": f"arn:aws:execute-api:us-east-1:123456789012:abcdef1234/prod/{method}{path}",
    }
    if token is not None:
        event["authorizationToken"] = token
    return event
