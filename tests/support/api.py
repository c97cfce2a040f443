"""Call the real authorizer and API handlers the way API Gateway does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from functions.api.handler import handler as api_handler
from functions.authorizer.handler import handler as authorizer_handler
from tests.support.apigw import rest_event, token_event


@dataclass
class HttpResult:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def error(self) -> dict[str, Any]:
        return dict(self.body["error"])


class ApiCaller:
    def __init__(self, api_key: str | None) -> None:
        self.api_key = api_key

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
        token = f"Bearer {self.api_key}" if self.api_key else None
        try:
            policy = authorizer_handler(token_event(token, method, path), None)
        except Exception as exc:
            if str(exc) != "Unauthorized":
                raise
            # API Gateway answers exactly this exception with a 401.
            return HttpResult(401, {}, {"message": "Unauthorized"})
        assert policy["policyDocument"]["Statement"][0]["Effect"] == "Allow"
        event = rest_event(
            method,
            path,
            body=body,
            headers=headers,
            query=query,
            authorizer=policy["context"],
            raw_body=raw_body,
        )
        resp = api_handler(event, None)
        flat = {k: v for k, v in (resp.get("headers") or {}).items()}
        for k, values in (resp.get("multiValueHeaders") or {}).items():
            flat[k] = values[-1]
        text = resp.get("body") or ""
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return HttpResult(resp["statusCode"], flat, parsed)

    def post_job(self, request: Any, **kw: Any) -> HttpResult:
        return self.call("POST", "/v1/jobs", request, **kw)

    def get_job(self, job_id: str) -> HttpResult:
        return self.call("GET", f"/v1/jobs/{job_id}")
