"""A job's ``requires`` routed by the API through the real handlers on moto: to the pool that
has it (its message in that pool's queue), or 422 on ``requires`` naming every pool."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devstack.local_settings import LOCAL_POOLS
from devstack.provision import Provisioned
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import CoreSettings
from tests.support.api import ApiCaller, caller

PAGE = {"action": "goto", "url": "https://shop.example.com/"}


@pytest.fixture
def pools(api_env: Provisioned, monkeypatch: pytest.MonkeyPatch) -> Provisioned:
    offers = [offer.model_dump(mode="json") for offer in LOCAL_POOLS]
    monkeypatch.setenv("PAGEFLEET_POOLS", json.dumps(offers))
    RUNTIME.reset()  # the job services read the offers once
    return api_env


def _pool_of(job_id: str, tenant: str) -> Any:
    svc = RUNTIME.job_services(RUNTIME.settings(CoreSettings))
    return svc.store.get(tenant, job_id).pool


def test_a_job_that_needs_more_memory_runs_in_the_pool_that_has_it(
    alice: ApiCaller, pools: Provisioned
) -> None:
    made = alice.call("POST", "/v1/jobs", {"steps": [PAGE], "requires": {"memory_mib": 3000}})
    assert made.status == 202, made.body
    assert _pool_of(made.body["job_id"], "alice") == "heavy"
    plain = alice.call("POST", "/v1/jobs", {"steps": [PAGE], "requires": {}})
    assert _pool_of(plain.body["job_id"], "alice") == "standard"


def test_no_pool_fits_is_a_422_on_requires_naming_every_pool(
    alice: ApiCaller, pools: Provisioned
) -> None:
    refused = alice.call("POST", "/v1/jobs", {"steps": [PAGE], "requires": {"memory_mib": 64_000}})
    assert refused.status == 422, refused.body
    assert refused.error["field"] == "requires"
    message = refused.error["message"]
    assert "standard: 2048 MiB of memory, under 64000" in message
    assert "heavy: 4096 MiB of memory, under 64000" in message
    named = alice.call(
        "POST", "/v1/jobs", {"steps": [PAGE], "pool": "standard", "requires": {"isolation": "task"}}
    )
    assert named.status == 422 and "standard: isolation shared, not task" in named.error["message"]
    checked = alice.call(
        "POST", "/v1/jobs/validate", {"steps": [PAGE], "requires": {"memory_mib": 64_000}}
    )
    assert checked.body["valid"] is False
    assert [e["field"] for e in checked.body["errors"]] == ["requires"]


def test_without_published_pools_requires_is_refused_saying_so(
    alice: ApiCaller, api_env: Provisioned
) -> None:
    refused = alice.call("POST", "/v1/jobs", {"steps": [PAGE], "requires": {"memory_mib": 1}})
    assert refused.status == 422 and refused.error["field"] == "requires"
    assert "publishes no pool capabilities" in refused.error["message"]


def test_a_tenant_limited_to_some_pools_is_routed_among_them_or_told_which_it_may_use(
    alice: ApiCaller, pools: Provisioned
) -> None:
    admin = caller(pools, "ops", admin=True)
    limited = admin.call("PATCH", "/v1/admin/tenants/alice/limits", {"pools": ["heavy"]})
    assert limited.status == 200, limited.body
    assert limited.body["limits"]["pools"] == ["heavy"] and "pools" in limited.body["overrides"]
    # Named no pool: the smallest of its own, not the stage's default "standard".
    plain = alice.call("POST", "/v1/jobs", {"steps": [PAGE]})
    assert plain.status == 202, plain.body
    assert _pool_of(plain.body["job_id"], "alice") == "heavy"
    named = alice.call("POST", "/v1/jobs", {"steps": [PAGE], "pool": "standard"})
    assert named.status == 422 and named.error["field"] == "pool"
    assert named.error["message"] == (
        "pool 'standard' is not allowed for this tenant; its pools: heavy"
    )
    routed = alice.call("POST", "/v1/jobs", {"steps": [PAGE], "requires": {"memory_mib": 8000}})
    assert routed.status == 422 and routed.error["field"] == "requires"
    assert "standard: not allowed for this tenant" in routed.error["message"]
    assert "(this tenant's pools: heavy)" in routed.error["message"]
    # A batch's items go the same way (one planning path).
    batch = alice.call(
        "POST", "/v1/batches", {"jobs": [{"job": {"steps": [PAGE], "pool": "standard"}}]}
    )
    assert batch.status == 200  # a batch answers per item
    assert "not allowed for this tenant" in json.dumps(batch.body["results"][0])
    # A browser session is a job too: its pool is checked the same way.
    session = alice.call("POST", "/v1/browser-sessions", {"pool": "standard"})
    assert session.status == 422 and session.error["field"] == "pool"
    opened = alice.call("POST", "/v1/browser-sessions", {})
    assert opened.status == 201, opened.body
    assert _pool_of(opened.body["session_id"], "alice") == "heavy"
    # Back to the stage default (every pool): standard again.
    reset = admin.call("PATCH", "/v1/admin/tenants/alice/limits", {"reset": ["pools"]})
    assert reset.status == 200 and reset.body["limits"]["pools"] is None
    again = alice.call("POST", "/v1/jobs", {"steps": [PAGE], "pool": "standard"})
    assert again.status == 202, again.body


def test_a_limit_naming_a_pool_the_deployment_lacks_is_a_422_naming_its_pools(
    pools: Provisioned,
) -> None:
    admin = caller(pools, "ops", admin=True)
    refused = admin.call("PATCH", "/v1/admin/tenants/alice/limits", {"pools": ["gpu"]})
    assert refused.status == 422 and refused.error["field"] == "pools"
    assert refused.error["message"] == (
        "unknown pools ['gpu']; this deployment's pools: standard, heavy"
    )
    malformed = admin.call("PATCH", "/v1/admin/tenants/alice/limits", {"pools": ["Big-One"]})
    assert malformed.status == 422


def test_a_named_pool_the_deployment_lacks_is_a_422_naming_its_pools(
    alice: ApiCaller, pools: Provisioned
) -> None:
    refused = alice.call("POST", "/v1/jobs", {"steps": [PAGE], "pool": "gpu"})
    assert refused.status == 422 and refused.error["field"] == "pool"
    assert (
        refused.error["message"] == "unknown pool 'gpu'; this deployment's pools: standard, heavy"
    )
