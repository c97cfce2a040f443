"""Host names that cannot be right are refused before any lookup (issue 23), by each of the
policy's three users: the worker's goto guard, the egress proxy and the webhook URL check.

Nothing here connects anywhere but to the proxy under test on 127.0.0.1: the resolvers are
stubs that record whether they were asked (they never were), and the proxy's connector
records what it was asked to dial and refuses it.
"""

from __future__ import annotations

import asyncio

import pytest

from browser_task.egress.guard import EgressGuard, EgressPolicy
from browser_task.egress.http import REFUSAL_HEADER
from browser_task.egress.proxy import EgressProxy, Streams
from pagefleet.targets.egress_policy import (
    EgressRefused,
    check_url,
    hostname_problem,
    literal_address,
)

# As they appear in a URL's authority; each is refused even where loopback is allowed.
IMPOSSIBLE_HOSTS = [
    "127.0.0.1%2e",  # percent-encoding: a browser decodes it, a resolver would not
    "%31%32%37.0.0.1",
    "127.0.0.1..",  # a second trailing dot: an empty label
    "a..example.com",
    ".example.com",
    "1.2.3.4.5",  # ends in a number, but is no IPv4 address
    "999.0.0.1",
    "example.0x7f",
    "intranet",  # single label: completed by the resolver's search domains
    "printer.local",  # mDNS
    "db.internal",
    "nas.home.arpa",
    "site.invalid",
    "abc.onion",
    "ex!ample.com",
    "[fe80::1%25eth0]",  # an IPv6 zone id
]
LOOPBACK_NAMES = ["localhost", "foo.localhost", "a.b.localhost.", "FOO.LocalHost"]


class RecordingResolver:
    """Answers every name with a public address, and records that it was asked."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def lookup(self, host: str) -> list[str]:
        self.calls.append(host)
        return ["93.184.216.34"]

    async def __call__(self, host: str) -> list[str]:
        return self.lookup(host)


class RefusingConnector:
    def __init__(self) -> None:
        self.dialled: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Streams:
        self.dialled.append((host, port))
        raise OSError("test connector: never dials")


@pytest.mark.parametrize("host", IMPOSSIBLE_HOSTS)
def test_the_guard_refuses_impossible_hosts_without_a_lookup(host: str) -> None:
    resolver = RecordingResolver()
    guard = EgressGuard(allow_loopback=True, resolver=resolver)
    verdict = asyncio.run(guard.check(f"http://{host}:8080/x"))
    assert not verdict.allowed
    assert "not a host name" in (verdict.reason or "")
    assert resolver.calls == []


@pytest.mark.parametrize("host", IMPOSSIBLE_HOSTS)
def test_webhook_urls_with_impossible_hosts_are_refused_without_a_lookup(host: str) -> None:
    resolver = RecordingResolver()
    with pytest.raises(EgressRefused) as refused:
        check_url(f"https://{host}/hook", EgressPolicy(allow_loopback=True), resolver.lookup)
    assert "not a host name" in refused.value.reason and not refused.value.transient
    assert resolver.calls == []


def test_the_proxy_refuses_impossible_hosts_without_a_lookup_or_a_connection() -> None:
    resolver, connector = RecordingResolver(), RefusingConnector()

    async def go() -> list[bytes]:
        proxy = EgressProxy(EgressPolicy(allow_loopback=True), resolver, connect=connector)
        await proxy.start()
        answers = []
        try:
            for host in IMPOSSIBLE_HOSTS:
                target = f"{host}:443"
                for request in (
                    f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n",
                    f"GET http://{host}:80/ HTTP/1.1\r\nHost: {host}\r\n\r\n",
                ):
                    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
                    writer.write(request.encode())
                    answers.append(await asyncio.wait_for(reader.read(), 30))
                    writer.close()
        finally:
            await proxy.close()
        return answers

    for answer in asyncio.run(go()):
        assert answer.startswith(b"HTTP/1.1 403"), answer
        assert REFUSAL_HEADER.encode() in answer
    assert resolver.calls == []
    assert connector.dialled == []


@pytest.mark.parametrize("host", LOOPBACK_NAMES)
def test_localhost_names_are_loopback_and_never_looked_up(host: str) -> None:
    assert str(literal_address(host)) == "127.0.0.1"
    resolver = RecordingResolver()
    production = EgressGuard(allow_loopback=False, resolver=resolver)
    refused = asyncio.run(production.check(f"http://{host}:8080/"))
    assert not refused.allowed and "loopback" in (refused.reason or "")
    local = EgressGuard(allow_loopback=True, resolver=resolver)
    assert asyncio.run(local.check(f"http://{host}:8080/")).allowed
    with pytest.raises(EgressRefused, match="loopback"):
        check_url(f"http://{host}/hook", EgressPolicy(), resolver.lookup)
    assert resolver.calls == []


@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        "shop.example.co.uk",
        "xn--bcher-kva.de",
        "bücher.de",
        "_dmarc.example.com",
        "a-b.example",
        "93.184.216.34",
        "2130706433",  # an IPv4 spelling: judged as the address it names
        "2606:4700:4700::1111",
    ],
)
def test_real_host_names_and_literals_pass_the_face_check(host: str) -> None:
    assert hostname_problem(host) is None
