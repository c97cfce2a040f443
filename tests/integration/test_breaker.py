"""The circuit breakers per origin, shared through DynamoDB (moto server): a tenant's own
breaker opens on its failures alone, the shared one only when several tenants fail."""

from __future__ import annotations

import pytest

from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.breakers import DomainBreakers
from pagefleet.runtime import RUNTIME
from pagefleet.targets.breakers import SHARED, TENANT, BreakerPolicy, BreakerState, origin_of

POLICY = BreakerPolicy(window_s=60, min_requests=4, failure_rate=0.5, cooldown_s=30)
SITE = "https://site.test:443"


@pytest.fixture
def breakers(provisioned: Provisioned) -> DomainBreakers:
    return DomainBreakers(RUNTIME.client("dynamodb"), provisioned.jobs_table, POLICY)


def test_origins_are_scheme_host_and_port() -> None:
    assert origin_of("https://Shop.Example.com/a?b") == "https://shop.example.com:443"
    assert origin_of("http://shop.example.com:8080/") == "http://shop.example.com:8080"
    assert origin_of("http://[::1]:9/") == "http://[::1]:9"
    assert origin_of("file:///etc/passwd") is None
    assert origin_of("not a url") is None


def fail(breakers: DomainBreakers, tenant: str, origin: str = SITE, times: int = 4) -> None:
    for _ in range(times):
        breakers.record(origin, tenant=tenant, ok=False, now=1_000)


def test_one_tenants_failures_open_only_its_own_breaker(breakers: DomainBreakers) -> None:
    for ok in (True, False, False):
        assert breakers.record(SITE, tenant="a", ok=ok, now=1_000) is BreakerState.CLOSED
    # 3 failures of 4 >= 50%: tenant a's own breaker opens, the shared one does not.
    assert breakers.record(SITE, tenant="a", ok=False, now=1_000) is BreakerState.OPEN
    assert breakers.get(SITE, "a").state is BreakerState.OPEN
    assert breakers.get(SITE).state is BreakerState.CLOSED
    refused = breakers.admit(SITE, tenant="a", now=1_010, worker="w1")
    assert not refused.allowed and refused.scope == TENANT and refused.retry_after_s == 20
    assert breakers.admit(SITE, tenant="b", now=1_010, worker="w1").allowed


def test_a_site_failing_for_several_tenants_is_held_back_for_everyone(
    breakers: DomainBreakers,
) -> None:
    fail(breakers, "a", times=2)
    fail(breakers, "b", times=2)
    assert breakers.get(SITE).state is BreakerState.OPEN
    assert breakers.get(SITE).failing_tenants == 2
    refused = breakers.admit(SITE, tenant="c", now=1_010, worker="w1")
    assert not refused.allowed and refused.scope == SHARED


def test_other_ports_of_a_host_are_other_breakers(breakers: DomainBreakers) -> None:
    closed_port = "http://127.0.0.1:9"
    fail(breakers, "a", closed_port)
    fail(breakers, "b", closed_port)
    assert breakers.get(closed_port).state is BreakerState.OPEN
    assert breakers.admit("http://127.0.0.1:8080", tenant="a", now=1_010, worker="w").allowed


def test_few_requests_never_open_it(breakers: DomainBreakers) -> None:
    fail(breakers, "a", times=3)
    assert breakers.get(SITE, "a").state is BreakerState.CLOSED


def test_window_resets_old_counts(breakers: DomainBreakers) -> None:
    fail(breakers, "a", times=3)
    # A minute later the old failures no longer count.
    assert breakers.record(SITE, tenant="a", ok=False, now=1_100) is BreakerState.CLOSED
    assert breakers.get(SITE, "a").total == 1
    assert breakers.get(SITE).failing_tenants == 1


def test_after_cooldown_exactly_one_probe_runs(breakers: DomainBreakers) -> None:
    fail(breakers, "a")
    first = breakers.admit(SITE, tenant="a", now=1_031, worker="w1")
    second = breakers.admit(SITE, tenant="a", now=1_031, worker="w2")
    assert first.allowed and first.probe and first.probes == {TENANT}
    assert not second.allowed
    assert breakers.get(SITE, "a").state is BreakerState.HALF_OPEN


def test_successful_probe_closes_failed_probe_reopens(breakers: DomainBreakers) -> None:
    fail(breakers, "a")
    probe = breakers.admit(SITE, tenant="a", now=1_031, worker="w1")
    state = breakers.record(SITE, tenant="a", ok=True, now=1_032, probes=probe.probes, worker="w1")
    assert state is BreakerState.CLOSED
    assert breakers.admit(SITE, tenant="a", now=1_033, worker="w2").allowed

    other = "https://b.test:443"
    fail(breakers, "a", other)
    probe = breakers.admit(other, tenant="a", now=1_031, worker="w1")
    state = breakers.record(
        other, tenant="a", ok=False, now=1_032, probes=probe.probes, worker="w1"
    )
    assert state is BreakerState.OPEN
    assert not breakers.admit(other, tenant="a", now=1_040, worker="w2").allowed  # new cooldown


def test_a_silent_probe_is_replaced(breakers: DomainBreakers) -> None:
    fail(breakers, "a")
    assert breakers.admit(SITE, tenant="a", now=1_031, worker="dead").probe
    held = breakers.admit(SITE, tenant="a", now=1_031 + POLICY.probe_timeout_s - 1, worker="w2")
    assert not held.allowed
    late = breakers.admit(SITE, tenant="a", now=1_031 + POLICY.probe_timeout_s, worker="w2")
    assert late.allowed and late.probe


def test_breakers_are_listed_per_origin(breakers: DomainBreakers) -> None:
    fail(breakers, "a", "https://x.test:443", times=2)
    fail(breakers, "b", "https://x.test:443", times=2)
    breakers.record("https://y.test:443", tenant="a", ok=True, now=1_000)
    states = {d.domain: d.state for d in breakers.list()}
    assert states == {"https://x.test:443": BreakerState.OPEN, "https://y.test:443": "closed"}
    assert [d.domain for d in breakers.on_host("x.test")] == ["https://x.test:443"]
    assert [d.domain for d in breakers.on_host("x.test", "a")] == ["https://x.test:443"]


def test_a_tenant_sees_states_and_probe_times_never_counts(api_env: Provisioned) -> None:
    from functions.api import app as api_app
    from pagefleet.tenancy.api_keys import create_api_key
    from tests.support.api import ApiCaller

    store = RUNTIME.tenant_store(api_env.tenants_table)
    acme = ApiCaller(create_api_key(store, "acme")[0])
    admin = ApiCaller(create_api_key(store, "ops", admin=True)[0])
    now = 2_000_000_000
    for tenant in ("acme", "bolt"):
        for _ in range(5):
            api_app.breakers().record("https://down.test:443", tenant=tenant, ok=False, now=now)
    listed = admin.call("GET", "/v1/domains")
    assert listed.status == 200
    [domain] = listed.body["domains"]
    assert (domain["domain"], domain["state"]) == ("down.test", "open")
    assert domain["origins"][0]["failures"] == 10
    assert domain["origins"][0]["failing_tenants"] == 2
    assert acme.call("GET", "/v1/domains").status == 403
    one = acme.call("GET", "/v1/domains/DOWN.test")
    assert one.status == 200
    [origin] = one.body["origins"]
    assert origin == {
        "origin": "https://down.test:443",
        "state": "open",
        "next_probe_at": now + 30,
        "tenant_state": "open",
        "tenant_next_probe_at": now + 30,
    }
    # acme's jobs did not use port 80 of the site.
    assert acme.call("GET", "/v1/domains/down.test:80").status == 404
    admin_view = admin.call("GET", "/v1/domains/down.test").body["origins"][0]
    assert (admin_view["failures"], admin_view["tenant_state"]) == (10, "closed")


def test_a_tenant_sees_only_origins_its_own_jobs_used(api_env: Provisioned) -> None:
    """Issue 23: any tenant could read which sites other tenants automate, and their state."""
    from functions.api import app as api_app
    from pagefleet.tenancy.api_keys import create_api_key
    from tests.support.api import ApiCaller

    store = RUNTIME.tenant_store(api_env.tenants_table)
    acme, other = (ApiCaller(create_api_key(store, t)[0]) for t in ("acme", "other"))
    now = 2_000_000_000
    for tenant in ("acme", "bolt"):
        for _ in range(5):
            api_app.breakers().record("https://down.test:443", tenant=tenant, ok=False, now=now)
    api_app.breakers().record("https://up.test:443", tenant="acme", ok=True, now=now)
    assert acme.call("GET", "/v1/domains/up.test").status == 200

    # Another tenant's site and a site nobody uses: one answer, so neither is an oracle.
    used_by_others = other.call("GET", "/v1/domains/down.test")
    unused = other.call("GET", "/v1/domains/never.test")
    assert used_by_others.status == unused.status == 404
    assert used_by_others.error["code"] == unused.error["code"] == "not_found"
    assert (
        used_by_others.error["message"].replace("down.test", "never.test")
        == (unused.error["message"])
    )
    assert used_by_others.headers.keys() == unused.headers.keys()
    assert other.call("GET", "/v1/domains/up.test").status == 404

    # Once one of its own jobs is held back there, the tenant sees why.
    held = api_app.breakers().admit("https://down.test:443", tenant="other", now=now, worker="w")
    assert not held.allowed
    mine = other.call("GET", "/v1/domains/down.test")
    assert mine.status == 200
    assert mine.body["origins"] == [
        {
            "origin": "https://down.test:443",
            "state": "open",
            "next_probe_at": now + 30,
            "tenant_state": "closed",
        }
    ]


def test_a_closed_origins_admission_and_a_flush_in_its_window_are_one_request_each(
    breakers: DomainBreakers,
) -> None:
    """What a worker pays per job for the breakers (bench/aws_requests.py): both of an
    origin's breakers read together, and counts added by one write per breaker while the
    window is current (a new window costs its reset on top)."""
    db = RUNTIME.client("dynamodb")
    calls: list[str] = []

    def count(model: object, **_: object) -> None:
        calls.append(str(getattr(model, "name", "?")))

    db.meta.events.register("before-call.dynamodb", count)
    try:
        breakers.record_counts(SITE, tenant="a", total=2, failures=1, now=1_000)  # new windows
        calls.clear()
        assert breakers.admit(SITE, tenant="a", now=1_001, worker="w").allowed
        assert calls == ["BatchGetItem"]
        calls.clear()
        assert breakers.record_counts(SITE, tenant="a", total=3, failures=0, now=1_010) is (
            BreakerState.CLOSED
        )
        assert calls == ["UpdateItem", "UpdateItem"]  # the tenant's breaker, the shared one
        calls.clear()
        # Past the window: each breaker starts a new one, and the old counts are gone.
        breakers.record_counts(SITE, tenant="a", total=1, failures=1, now=1_000 + 61)
        assert calls.count("UpdateItem") == 6
    finally:
        db.meta.events.unregister("before-call.dynamodb", count)
    assert (breakers.get(SITE, "a").total, breakers.get(SITE, "a").failures) == (1, 1)
    assert (breakers.get(SITE).total, breakers.get(SITE).failures) == (1, 1)
    assert breakers.get(SITE, "a").window_start == 1_061


def test_keys_the_batch_read_left_unprocessed_are_asked_for_again() -> None:
    """BatchGetItem may answer part of a batch (throttling) and name the rest in
    UnprocessedKeys (DynamoDB API reference): the admission reads those again rather than
    taking an unread breaker for a closed one."""
    import boto3
    from botocore.stub import Stubber

    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    breakers = DomainBreakers(client, "jobs", POLICY)
    own = {"pk": {"S": "TENANT#a"}, "sk": {"S": "BREAKER#site.test#https:443"}}
    shared = {"pk": {"S": "BREAKERS"}, "sk": {"S": "ORIGIN#site.test#https:443"}}
    opened = {**shared, "state": {"S": "open"}, "opened_at": {"N": "1000"}}
    with Stubber(client) as stub:
        stub.add_response(
            "batch_get_item",
            {
                "Responses": {"jobs": []},
                "UnprocessedKeys": {"jobs": {"Keys": [own, shared], "ConsistentRead": True}},
            },
            {"RequestItems": {"jobs": {"Keys": [own, shared], "ConsistentRead": True}}},
        )
        stub.add_response(
            "batch_get_item",
            {"Responses": {"jobs": [opened]}, "UnprocessedKeys": {}},
            {"RequestItems": {"jobs": {"Keys": [own, shared], "ConsistentRead": True}}},
        )
        stub.add_response("update_item", {})  # the tenant's breaker made (it may look it up)
        refused = breakers.admit(SITE, tenant="a", now=1_010, worker="w")
        stub.assert_no_pending_responses()
    assert not refused.allowed and refused.scope == SHARED and refused.retry_after_s == 20
