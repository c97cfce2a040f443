"""The local gateway shapes events and answers like API Gateway (no network, fake handlers)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from devstack.gateway import (
    MAX_PAYLOAD_BYTES,
    PROXY_RESOURCE,
    ROOT_RESOURCE,
    HttpRequest,
    LambdaFunction,
    RestApi,
    method_arn,
    policy_allows,
    proxy_resource,
    proxy_response,
    rest_event,
)
from tests.support.apigw import rest_event as support_rest_event


def _request(
    method: str = "GET", path: str = "/v1/jobs", body: bytes = b"", **headers: str
) -> HttpRequest:
    hdrs = [("Host", "127.0.0.1:8080"), ("Authorization", "Bearer pf_good"), *headers.items()]
    return HttpRequest(method=method, raw_path=path, headers=hdrs, body=body)


def _allow(principal: str = "dev:k1", tenant: str = "dev", effect: str = "Allow") -> dict[str, Any]:
    return {
        "principalId": principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Action": "execute-api:Invoke",
                    "Effect": effect,
                    "Resource": "arn:aws:execute-api:us-east-1:123456789012:local/v1/*",
                }
            ],
        },
        "context": {"tenant_id": tenant, "admin": "false"},
    }


class Recorder:
    def __init__(self, result: Any = None, error: Exception | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.result = result
        self.error = error

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        assert context.get_remaining_time_in_millis() > 0
        self.events.append(event)
        if self.error is not None:
            raise self.error
        return self.result


def _api(authorizer: Recorder, handler: Recorder, now: list[float] | None = None) -> RestApi:
    clock = now if now is not None else [0.0]
    return RestApi(
        handler=LambdaFunction("api", handler),
        authorizer=LambdaFunction("authorizer", authorizer),
        clock=lambda: clock[0],
    )


OK = {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}


def test_every_path_is_the_proxy_resource_as_lambda_rest_api_deploys_it() -> None:
    assert proxy_resource("/") == (ROOT_RESOURCE, {})
    assert proxy_resource("/v1/jobs") == (PROXY_RESOURCE, {"proxy": "v1/jobs"})
    assert proxy_resource("/v1/admin/dead-letters/redrive") == (
        PROXY_RESOURCE,
        {"proxy": "v1/admin/dead-letters/redrive"},
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/domains"),
        ("GET", "/admin/dead-letters"),
        ("POST", "/jobs/01abc/cancel"),
        ("DELETE", "/anything/at/all"),
        ("GET", "/"),
    ],
)
def test_every_method_and_path_reaches_the_handler(method: str, path: str) -> None:
    """The resolver decides what exists; the gateway never answers Missing Authentication
    Token for a path it does not know. The URL starts with the stage (the version), which
    the integration sees only in requestContext.path, as on API Gateway."""
    handler = Recorder(OK)
    url = "/v1" + (path if path != "/" else "")
    response = _api(Recorder(_allow()), handler).handle(_request(method, url))
    assert response.status == 200
    [event] = handler.events
    assert event["path"] == path and event["httpMethod"] == method
    assert event["requestContext"]["path"] == f"/v1{path}"
    assert event["resource"] == (ROOT_RESOURCE if path == "/" else PROXY_RESOURCE)


def test_a_url_outside_the_stage_is_forbidden_before_the_authorizer() -> None:
    authorizer, handler = Recorder(_allow()), Recorder(OK)
    for url in ("/jobs", "/v2/jobs", "/v10/jobs", "/"):
        assert _api(authorizer, handler).handle(_request("GET", url)).status == 403
    assert authorizer.events == [] and handler.events == []


def test_rest_event_has_the_proxy_integration_shape() -> None:
    request = HttpRequest(
        method="GET",
        raw_path="/v1/jobs?status=queued&limit=5&tag=a&tag=b",
        headers=[("Host", "h"), ("X-Multi", "1"), ("X-Multi", "2")],
        body=b"",
        source_ip="127.0.0.1",
    )
    event = rest_event(
        request,
        resource=PROXY_RESOURCE,
        path_parameters={"proxy": "v1/jobs"},
        authorizer={"tenant_id": "dev", "principalId": "dev:k1"},
        api_id="local",
        stage="prod",
        request_id="rid-1",
        now_ms=1_700_000_000_000,
    )
    assert event["resource"] == "/{proxy+}"
    assert event["path"] == "/v1/jobs"
    assert event["httpMethod"] == "GET"
    assert event["queryStringParameters"] == {"status": "queued", "limit": "5", "tag": "b"}
    assert event["multiValueQueryStringParameters"]["tag"] == ["a", "b"]
    assert event["headers"]["X-Multi"] == "2"
    assert event["multiValueHeaders"]["X-Multi"] == ["1", "2"]
    assert event["pathParameters"] == {"proxy": "v1/jobs"}
    assert event["body"] is None and event["isBase64Encoded"] is False
    ctx = event["requestContext"]
    assert ctx["requestId"] == "rid-1"
    assert ctx["stage"] == "prod"
    assert ctx["identity"]["sourceIp"] == "127.0.0.1"
    assert ctx["authorizer"]["tenant_id"] == "dev"
    assert ctx["resourcePath"] == "/{proxy+}"
    assert ctx["requestTimeEpoch"] == 1_700_000_000_000


def test_binary_body_is_base64_encoded() -> None:
    event = rest_event(
        _request("POST", body=b"\xff\xfe\x00"),
        resource=PROXY_RESOURCE,
        path_parameters={"proxy": "v1/jobs"},
        authorizer=None,
        api_id="local",
        stage="prod",
        request_id="r",
    )
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == b"\xff\xfe\x00"


def test_authorizer_gets_a_token_event_then_the_handler_gets_its_context() -> None:
    authorizer, handler = Recorder(_allow()), Recorder(OK)
    response = _api(authorizer, handler).handle(_request(path="/v1/jobs/01abc"))
    assert response.status == 200
    assert authorizer.events == [
        {
            "type": "TOKEN",
            "authorizationToken": "Bearer pf_good",
            "methodArn": method_arn("local", "v1", "GET", "/jobs/01abc"),
        }
    ]
    event = handler.events[0]
    assert event["pathParameters"] == {"proxy": "jobs/01abc"}
    assert event["requestContext"]["authorizer"]["tenant_id"] == "dev"
    assert event["requestContext"]["authorizer"]["principalId"] == "dev:k1"


def test_authorizer_raising_unauthorized_is_401_and_handler_never_runs() -> None:
    handler = Recorder(OK)
    response = _api(Recorder(error=Exception("Unauthorized")), handler).handle(_request())
    assert response.status == 401
    # The API's error shape, as the stack's UNAUTHORIZED gateway response makes AWS answer.
    assert json.loads(response.body) == {
        "error": {"code": "unauthorized", "message": "Unauthorized"}
    }
    assert handler.events == []


def test_missing_authorization_header_is_401_without_invoking_the_authorizer() -> None:
    authorizer = Recorder(_allow())
    request = HttpRequest(method="GET", raw_path="/v1/jobs", headers=[("Host", "h")], body=b"")
    assert _api(authorizer, Recorder(OK)).handle(request).status == 401
    assert authorizer.events == []


def test_deny_policy_is_403() -> None:
    response = _api(Recorder(_allow(effect="Deny")), Recorder(OK)).handle(_request())
    assert response.status == 403


def test_authorizer_error_other_than_unauthorized_is_500() -> None:
    assert _api(Recorder(error=RuntimeError("boom")), Recorder(OK)).handle(_request()).status == 500


def test_policy_is_cached_per_token_until_the_ttl() -> None:
    now = [0.0]
    authorizer = Recorder(_allow())
    api = _api(authorizer, Recorder(OK), now)
    api.handle(_request())
    api.handle(_request(path="/v1/jobs/x"))
    assert len(authorizer.events) == 1
    api.handle(_request(Authorization="Bearer other"))
    assert len(authorizer.events) == 2
    now[0] = 301.0
    api.handle(_request())
    assert len(authorizer.events) == 3


def test_payload_over_10_mb_is_413() -> None:
    handler = Recorder(OK)
    big = _request("POST", body=b"x" * (MAX_PAYLOAD_BYTES + 1))
    assert _api(Recorder(_allow()), handler).handle(big).status == 413
    assert handler.events == []


def test_handler_exception_is_502() -> None:
    api = _api(Recorder(_allow()), Recorder(error=RuntimeError("crash")))
    assert api.handle(_request()).status == 502


def test_proxy_response_writes_headers_and_base64_body() -> None:
    response = proxy_response(
        {
            "statusCode": 202,
            "headers": {"Location": "/v1/jobs/1", "Content-Type": "image/png"},
            "multiValueHeaders": {"Set-Cookie": ["a=1", "b=2"]},
            "body": base64.b64encode(b"\x89PNG").decode(),
            "isBase64Encoded": True,
        },
        "rid",
    )
    assert response.status == 202
    assert response.body == b"\x89PNG"
    assert ("Location", "/v1/jobs/1") in response.headers
    assert [v for k, v in response.headers if k == "Set-Cookie"] == ["a=1", "b=2"]
    assert ("x-amzn-RequestId", "rid") in response.headers


def test_malformed_integration_response_is_502() -> None:
    assert proxy_response({"body": "no status"}, "rid").status == 502


@pytest.mark.parametrize("body", [{"ok": True}, ["a"], 7, True])
def test_a_body_that_is_not_a_string_is_a_malformed_response(body: object) -> None:
    """API Gateway's proxy integration takes a body as a string (JSON stringified by the
    function): anything else is "Malformed Lambda proxy response", a 502, never the
    object's text (the local gateway wrote ``{'ok': True}`` out with a 200)."""
    response = proxy_response({"statusCode": 200, "body": body}, "rid")
    assert response.status == 502
    assert proxy_response({"statusCode": 200, "body": None}, "rid").status == 200
    assert proxy_response({"statusCode": 204}, "rid").status == 204


@pytest.mark.parametrize(
    ("arn", "allowed"),
    [
        ("arn:aws:execute-api:us-east-1:123456789012:local/v1/GET/jobs", True),
        ("arn:aws:execute-api:us-east-1:123456789012:local/test/GET/jobs", False),
    ],
)
def test_policy_resources_match_with_wildcards(arn: str, allowed: bool) -> None:
    assert policy_allows(_allow(), arn) is allowed


def test_test_events_are_the_gateways_events() -> None:
    """tests/support/apigw builds its events with the gateway's builder: same shape."""
    event = support_rest_event(
        "POST",
        "/v1/jobs/a b",
        body={"x": 1},
        query="limit=5&tag=a&tag=b",
        authorizer={"tenant_id": "acme"},
    )
    assert event["path"] == "/jobs/a b"
    assert event["requestContext"]["path"] == "/v1/jobs/a b"
    assert event["resource"] == PROXY_RESOURCE
    assert event["pathParameters"] == {"proxy": "jobs/a b"}
    assert json.loads(event["body"]) == {"x": 1}
    assert event["multiValueQueryStringParameters"]["tag"] == ["a", "b"]
    assert event["headers"]["Content-Type"] == "application/json"
    assert event["requestContext"]["authorizer"] == {"tenant_id": "acme"}
    raw = support_rest_event("POST", "/v1/jobs", raw_body=b"\xff")
    assert raw["isBase64Encoded"] is True and base64.b64decode(raw["body"]) == b"\xff"


def test_the_public_route_runs_without_the_authorizer_on_its_own_resource() -> None:
    authorizer, handler = Recorder(_allow()), Recorder(OK)
    api = _api(authorizer, handler)
    request = HttpRequest(method="GET", raw_path="/v1/openapi.json", headers=[], body=b"")
    assert api.handle(request).status == 200
    assert authorizer.events == []
    (event,) = handler.events
    assert event["resource"] == "/openapi.json" and event["path"] == "/openapi.json"
    assert not event["requestContext"].get("authorizer")
    # Its resource has only that method: API Gateway's 403, in the API's error shape.
    refused = api.handle(_request("POST", "/v1/openapi.json"))
    assert refused.status == 403
    assert json.loads(refused.body)["error"]["code"] == "route_not_found"
    assert len(handler.events) == 1
    # Every other route still needs a key.
    missing = api.handle(HttpRequest(method="GET", raw_path="/v1/jobs", headers=[], body=b""))
    assert missing.status == 401
    assert json.loads(missing.body)["error"]["code"] == "unauthorized"
