"""Egress policy: pure address classification and the per-job URL guard (no connections)."""

from __future__ import annotations

import asyncio

import pytest

from browser_task.egress.guard import (
    AddressKind,
    EgressGuard,
    address_allowed,
    addresses_allowed,
    classify_address,
)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("93.184.216.34", AddressKind.PUBLIC),
        ("2606:4700:4700::1111", AddressKind.PUBLIC),
        ("127.0.0.1", AddressKind.LOOPBACK),
        ("127.8.9.10", AddressKind.LOOPBACK),
        ("::1", AddressKind.LOOPBACK),
        ("10.1.2.3", AddressKind.PRIVATE),
        ("172.16.0.1", AddressKind.PRIVATE),
        ("172.31.255.255", AddressKind.PRIVATE),
        ("192.168.1.1", AddressKind.PRIVATE),
        ("100.64.0.1", AddressKind.PRIVATE),  # carrier-grade NAT, shared space
        ("fd00:ec2::254", AddressKind.PRIVATE),  # EC2 IPv6 metadata
        ("169.254.169.254", AddressKind.LINK_LOCAL),  # cloud metadata
        ("169.254.0.1", AddressKind.LINK_LOCAL),
        ("fe80::1", AddressKind.LINK_LOCAL),
        ("224.0.0.1", AddressKind.MULTICAST),
        ("ff02::1", AddressKind.MULTICAST),
        ("0.0.0.0", AddressKind.UNSPECIFIED),
        ("::", AddressKind.UNSPECIFIED),
        ("240.0.0.1", AddressKind.RESERVED),
        ("192.0.2.10", AddressKind.RESERVED),  # documentation range
        ("::ffff:127.0.0.1", AddressKind.LOOPBACK),  # IPv4-mapped IPv6
        ("::ffff:169.254.169.254", AddressKind.LINK_LOCAL),
        ("::ffff:10.0.0.1", AddressKind.PRIVATE),
        ("::ffff:93.184.216.34", AddressKind.PUBLIC),
        ("64:ff9b::a9fe:a9fe", AddressKind.LINK_LOCAL),  # NAT64 of 169.254.169.254
    ],
)
def test_classify_address(address, kind):
    assert classify_address(address) is kind


def test_only_public_addresses_are_allowed_and_loopback_on_request():
    for kind in AddressKind:
        expected = kind is AddressKind.PUBLIC
        assert address_allowed(kind, allow_loopback=False) is expected
    assert address_allowed(AddressKind.LOOPBACK, allow_loopback=True)
    for kind in (AddressKind.PRIVATE, AddressKind.LINK_LOCAL, AddressKind.UNSPECIFIED):
        assert not address_allowed(kind, allow_loopback=True)


def test_one_bad_address_among_several_refuses_the_host():
    assert addresses_allowed(["93.184.216.34"], allow_loopback=False) is None
    reason = addresses_allowed(["93.184.216.34", "10.0.0.7"], allow_loopback=False)
    assert reason is not None and "10.0.0.7" in reason and "private" in reason
    assert addresses_allowed([], allow_loopback=False) is not None


class FakeResolver:
    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def __call__(self, host: str) -> list[str]:
        self.calls.append(host)
        if host not in self.table:
            raise OSError(-2, "Name or service not known")
        return self.table[host]


def check(guard: EgressGuard, url: str):
    return asyncio.run(guard.check(url))


def test_guard_refuses_schemes_other_than_http_and_https():
    guard = EgressGuard(allow_loopback=True, resolver=FakeResolver({}))
    for url in ("file:///etc/passwd", "ftp://example.com/x", "chrome://settings", "gopher://h/"):
        verdict = check(guard, url)
        assert not verdict.allowed, url
        assert "only http and https" in (verdict.reason or "")
    assert check(guard, "data:text/html,hi").allowed


def test_guard_resolves_names_once_per_host_and_judges_every_address():
    resolver = FakeResolver(
        {
            "shop.example": ["93.184.216.34"],
            "internal.example": ["10.0.0.5"],
            "metadata.example": ["169.254.169.254"],
            "localhost": ["127.0.0.1", "::1"],
        }
    )
    guard = EgressGuard(allow_loopback=False, resolver=resolver)
    assert check(guard, "https://shop.example/a").allowed
    assert check(guard, "https://shop.example/b?x=1").allowed
    assert resolver.calls == ["shop.example"]
    assert not check(guard, "http://internal.example/").allowed
    assert not check(guard, "http://metadata.example/latest/meta-data").allowed
    refused = check(guard, "http://localhost:8080/")
    assert not refused.allowed and "loopback" in (refused.reason or "")
    assert len(guard.refusals) == 3


def test_guard_judges_ip_literals_without_resolving():
    resolver = FakeResolver({})
    guard = EgressGuard(allow_loopback=True, resolver=resolver)
    assert check(guard, "http://127.0.0.1:5000/").allowed
    assert check(guard, "http://[::1]:5000/").allowed
    assert not check(guard, "http://169.254.169.254/").allowed
    assert not check(guard, "http://[::ffff:10.0.0.1]/").allowed
    assert not check(guard, "http://0.0.0.0:80/").allowed
    assert resolver.calls == []


def test_guard_refuses_unresolvable_hosts_without_caching_the_failure():
    resolver = FakeResolver({})
    guard = EgressGuard(allow_loopback=False, resolver=resolver)
    first = check(guard, "https://nowhere.example/")
    assert not first.allowed and (first.reason or "").startswith("could not resolve")
    check(guard, "https://nowhere.example/")
    assert resolver.calls == ["nowhere.example", "nowhere.example"]


# --- EgressPolicy: every range, odd spellings, metadata names (no connections) ---------------
from browser_task.egress.guard import EgressPolicy, literal_address, parse_ipv4_loose  # noqa: E402

FORBIDDEN = [
    "10.0.0.1",
    "10.255.255.255",
    "172.16.0.1",
    "172.31.255.254",
    "192.168.0.1",
    "127.0.0.1",
    "127.255.255.254",
    "::1",
    "169.254.0.1",
    "169.254.169.254",  # EC2 / GCP / Azure metadata
    "169.254.170.2",  # ECS / Fargate task credentials
    "fd00::1",  # unique local
    "fd00:ec2::254",  # EC2 IPv6 metadata
    "fe80::1",
    "fe80::1%eth0",
    "100.64.0.1",  # carrier-grade NAT
    "100.127.255.254",
    "0.0.0.0",
    "::",
    "224.0.0.251",
    "239.255.255.250",
    "ff02::1",
    "255.255.255.255",  # broadcast
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:10.0.0.1",
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b::7f00:1",
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "::7f00:1",  # deprecated IPv4-compatible
    "198.18.0.1",  # benchmarking
    "192.0.2.1",  # documentation
]


@pytest.mark.parametrize("address", FORBIDDEN)
@pytest.mark.parametrize("allow_loopback", [False, True])
def test_policy_refuses_every_non_public_range(address, allow_loopback):
    reason = EgressPolicy(allow_loopback=allow_loopback).address_reason(address)
    if allow_loopback and classify_address(address) is AddressKind.LOOPBACK:
        assert reason is None
    else:
        assert reason is not None, address


def test_policy_allows_public_addresses():
    policy = EgressPolicy()
    for address in ("93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"):
        assert policy.address_reason(address) is None


def test_test_override_allows_only_named_loopback_addresses():
    policy = EgressPolicy(allowed_loopback=frozenset({"127.0.0.2"}))
    assert policy.address_reason("127.0.0.2") is None
    assert policy.address_reason("::ffff:127.0.0.2") is None
    assert policy.address_reason("127.0.0.1") is not None
    assert policy.address_reason("::1") is not None
    assert policy.addresses_reason(["127.0.0.2", "127.0.0.1"]) is not None
    for bad in ("10.0.0.1", "169.254.169.254", "93.184.216.34"):
        with pytest.raises(ValueError, match="loopback addresses only"):
            EgressPolicy(allowed_loopback=frozenset({bad}))


@pytest.mark.parametrize(
    ("spelling", "address"),
    [
        ("2130706433", "127.0.0.1"),  # decimal
        ("0x7f000001", "127.0.0.1"),  # hex
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),  # octal
        ("0177.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),  # short forms
        ("127.0.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),  # trailing dot
        ("2852039166", "169.254.169.254"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("[::ffff:7f00:1]", "::ffff:7f00:1"),
        ("0", "0.0.0.0"),
    ],
)
def test_odd_ip_spellings_are_read_as_the_address_they_name(spelling, address):
    assert str(literal_address(spelling)) == address
    assert EgressPolicy().address_reason(literal_address(spelling) or "") is not None


def test_names_that_only_look_numeric_are_not_addresses():
    for name in ("example.com", "1e2.3", "256.1.1.1.1", "4294967296", "08.1", "1.2.3.4.5"):
        assert parse_ipv4_loose(name) is None, name


@pytest.mark.parametrize(
    "name",
    ["metadata.google.internal", "METADATA.google.internal.", "instance-data", "metadata"],
)
def test_metadata_hostnames_are_refused_without_resolving(name):
    assert EgressPolicy.host_reason(name) is not None
    resolver = FakeResolver({name.lower().rstrip("."): ["93.184.216.34"]})
    guard = EgressGuard(resolver=resolver)
    assert not check(guard, f"http://{name}/computeMetadata/v1/").allowed
    assert resolver.calls == []


def test_guard_refuses_odd_spellings_of_loopback_and_metadata():
    resolver = FakeResolver({})
    guard = EgressGuard(allow_loopback=False, resolver=resolver)
    for url in (
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://2852039166/latest/meta-data/",
    ):
        assert not check(guard, url).allowed, url
    assert resolver.calls == []


def test_scheme_check_needs_no_lookup():
    guard = EgressGuard(resolver=FakeResolver({}))
    for url in ("file:///etc/passwd", "view-source:http://x/", "chrome://version", "ftp://h/"):
        assert not guard.check_scheme(url).allowed, url
    for url in ("https://x/", "http://x/", "data:text/html,x", "blob:https://x/1", "about:blank"):
        assert guard.check_scheme(url).allowed, url


def test_each_refusal_of_the_guard_is_reported_once_with_host_port_and_kind():
    reports: list[tuple[str, int | None, str, str]] = []
    guard = EgressGuard(
        resolver=FakeResolver({"internal.example": ["10.0.0.5"]}),
        on_refusal=lambda *report: reports.append(report),
    )
    assert check(guard, "https://shop.example.invalid.example/").allowed is False  # unresolved
    assert not check(guard, "http://internal.example:8080/a").allowed
    assert not check(guard, "http://internal.example:8080/b").allowed  # cached, still reported
    assert not guard.check_scheme("file:///etc/passwd").allowed
    assert [(host, port, kind) for host, port, kind, _ in reports] == [
        ("shop.example.invalid.example", 443, "unresolved"),
        ("internal.example", 8080, "policy"),
        ("internal.example", 8080, "policy"),
        ("", None, "scheme"),
    ]
    assert all(reason for *_, reason in reports)
