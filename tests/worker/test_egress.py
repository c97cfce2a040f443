"""Egress policy: pure address classification and the per-job URL guard (no connections)."""

from __future__ import annotations

import asyncio

import pytest

from browser_task.egress import (
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
