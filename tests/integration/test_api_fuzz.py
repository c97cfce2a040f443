"""Property-based: requests generated from the served OpenAPI document never get a 5xx.

Schemathesis generates, for every operation of ``GET /v1/openapi.json``, requests that fit
the document and requests that break it (wrong types, missing fields, out-of-range values,
bad path parameters and headers). Each goes through the real authorizer and API handler as
an API Gateway event, against moto. Hypothesis is derandomized: every run sends the same
requests, so a failure reproduces.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any
from urllib.parse import urlencode, urlsplit

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode

from devstack.provision import Provisioned
from pagefleet.runtime import RUNTIME
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import ApiCaller, HttpResult

# Spread over every operation, so the suite's time stays put as routes are added.
TARGET_REQUESTS = 1200
MIN_REQUESTS = 1000
# How long the deployed API and the local stack keep a key's authorization (infra/config.py
# authorizer_cache_seconds, devstack.gateway.RestApi).
CACHE_S = 300


def send(caller: ApiCaller, case: Any) -> HttpResult:
    # The document's routes follow its server (the stage, /v1), as in every real URL.
    kwargs = case.as_transport_kwargs(base_url="https://api.example.test/v1")
    url = urlsplit(kwargs["url"])
    query = urlencode(kwargs.get("params") or {}, doseq=True)
    if url.query:
        query = f"{url.query}&{query}" if query else url.query
    headers = {str(k): str(v) for k, v in (kwargs.get("headers") or {}).items()}
    headers.pop("Authorization", None)  # the caller's own key goes to the authorizer
    raw: bytes | None = None
    if "json" in kwargs:
        raw = json.dumps(kwargs["json"]).encode()
    elif kwargs.get("data") is not None:
        data = kwargs["data"]
        raw = data if isinstance(data, bytes) else str(data).encode()
    return caller.call(
        kwargs["method"], url.path, headers=headers, query=query, raw_body=raw or None
    )


def test_generated_requests_never_get_a_5xx(api_env: Provisioned) -> None:
    store = RUNTIME.tenant_store(api_env.tenants_table)
    # The authorizer's answer cached per key, as the deployed API caches it (no key changes
    # here, and a valid key's policy allows the whole API): the authorizer runs once a key,
    # not once a request, and every request still meets the API handler.
    admin = ApiCaller(create_api_key(store, "ops", admin=True)[0], authorizer_ttl_s=CACHE_S)
    tenant = ApiCaller(create_api_key(store, "tenant-f")[0], authorizer_ttl_s=CACHE_S)
    served = tenant.call("GET", "/v1/openapi.json")
    assert served.status == 200
    schema = schemathesis.openapi.from_dict(served.body)

    statuses: Counter[int] = Counter()
    server_errors: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    per_mode = max(10, -(-TARGET_REQUESTS // (2 * len(operations))))
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(
                max_examples=per_mode,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                # Admin and tenant keys in turn: admin routes answer both (200 / 403).
                caller = admin if sum(statuses.values()) % 2 else tenant
                resp = send(caller, case)
                statuses[resp.status] += 1
                if resp.status >= 500:
                    server_errors.append(
                        f"{resp.status} {case.operation.label}: {case!r} -> {resp.body}"
                    )

            try:
                run()
            except (schemathesis.errors.SchemathesisError, Unsatisfiable):
                continue  # nothing to generate in this mode (no invalid form exists)

    total = sum(statuses.values())
    assert not server_errors, "\n".join(server_errors[:5])
    assert total >= MIN_REQUESTS, dict(statuses)
    # Both valid and invalid requests were sent.
    assert any(s < 300 for s in statuses) and any(400 <= s < 500 for s in statuses), statuses
