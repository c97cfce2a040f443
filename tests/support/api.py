"""Call the real authorizer and API handlers the way API Gateway does.

Requests go through the local gateway's REST API (``devstack.gateway.RestApi``: identity
header, authorizer policy, proxy event, proxy response) with both handlers run in this
process, so integration tests see what a client of the local stack sees, minus HTTP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from devstack.gateway import LambdaFunction, RestApi
from devstack.gateway.events import HttpRequest
from devstack.provision import Provisioned
from functions.api.handler import handler as api_handler
from functions.authorizer.handler import handler as authorizer_handler
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.apigw import API_ID, STAGE, http_request


@dataclass
class HttpResult:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def error(self) -> dict[str, Any]:
        return dict(self.body["error"])


def rest_api(authorizer_ttl_s: float = 0) -> RestApi:
    return RestApi(
        handler=LambdaFunction("pagefleet-api", api_handler),
        authorizer=LambdaFunction("pagefleet-authorizer", authorizer_handler),
        api_id=API_ID,
        stage=STAGE,
        # Tests revoke keys and expect the next call to see it: no authorizer cache unless
        # a test asks for the deployed API's.
        authorizer_ttl_s=authorizer_ttl_s,
    )


def gateway_transport() -> httpx.MockTransport:
    """httpx requests answered by the local gateway's REST API (authorizer and API handler
    in this process), as the local stack would answer them over HTTP."""
    api = rest_api()

    def handle(request: httpx.Request) -> httpx.Response:
        raw_path = request.url.raw_path.decode()
        answer = api.handle(
            HttpRequest(
                method=request.method,
                raw_path=raw_path,
                headers=list(request.headers.items()),
                body=request.read(),
            )
        )
        return httpx.Response(answer.status, headers=answer.headers, content=answer.body)

    return httpx.MockTransport(handle)


class ApiCaller:
    def __init__(self, api_key: str | None, *, authorizer_ttl_s: float = 0) -> None:
        self.api_key = api_key
        self._api = rest_api(authorizer_ttl_s)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        query: str = "",
        raw_body: bytes | None = None,
    ) -> HttpResult:
        sent = dict(headers or {})
        if self.api_key and not any(k.lower() == "authorization" for k in sent):
            sent["Authorization"] = f"Bearer {self.api_key}"
        request = http_request(
            method, path, body=body, headers=sent, query=query, raw_body=raw_body
        )
        response = self._api.handle(request)
        flat: dict[str, str] = {}
        for name, value in response.headers:
            flat[name] = value  # a repeated header: the last value, as before
        text = response.body.decode("utf-8", "replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return HttpResult(response.status, flat, parsed)

    def post_job(self, request: Any, **kw: Any) -> HttpResult:
        return self.call("POST", "/v1/jobs", request, **kw)

    def get_job(self, job_id: str) -> HttpResult:
        return self.call("GET", f"/v1/jobs/{job_id}")


def caller(env: Provisioned, tenant: str, *, admin: bool = False) -> ApiCaller:
    """A client of the API with a new key of ``tenant``."""
    key, _ = create_api_key(RUNTIME.tenant_store(env.tenants_table), tenant, admin=admin)
    return ApiCaller(key)
