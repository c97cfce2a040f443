"""Egress policy: which addresses a job's browser may reach (SSRF guard).

The address rules are pure functions, unit-tested without opening any connection. The
``EgressGuard`` applies them to URLs, resolving host names once per job; the browser context
routes every request (redirects and subresources included) through it.

This is a request-time check, not a network boundary: a host that resolves differently
between our check and Chromium's own lookup (DNS rebinding) slips through. The forwarding
egress proxy planned for a later issue closes that gap; this guard keeps the policy in one
place so the proxy can reuse it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOWED_SCHEMES = frozenset({"http", "https"})

# Schemes a page may use without any network request leaving the browser.
_LOCAL_SCHEMES = frozenset({"data", "blob", "about"})

# NAT64 well-known prefix: 64:ff9b::a.b.c.d reaches IPv4 a.b.c.d through a translator.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SHARED_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class AddressKind(StrEnum):
    PUBLIC = "public"
    LOOPBACK = "loopback"
    PRIVATE = "private"
    LINK_LOCAL = "link_local"  # includes 169.254.169.254, the cloud metadata endpoint
    MULTICAST = "multicast"
    UNSPECIFIED = "unspecified"
    RESERVED = "reserved"


def _embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr in _NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def classify_address(value: str | IPAddress) -> AddressKind:
    """What kind of address this is; IPv4-mapped / NAT64 IPv6 are judged by their IPv4."""
    addr: IPAddress = ipaddress.ip_address(value) if isinstance(value, str) else value
    if isinstance(addr, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(addr)
        if embedded is not None:
            return classify_address(embedded)
        if addr.scope_id:  # fe80::1%eth0 and friends
            return AddressKind.LINK_LOCAL
    if addr.is_unspecified:
        return AddressKind.UNSPECIFIED
    if addr.is_loopback:
        return AddressKind.LOOPBACK
    if addr.is_link_local:
        return AddressKind.LINK_LOCAL
    if addr.is_multicast:
        return AddressKind.MULTICAST
    if isinstance(addr, ipaddress.IPv4Address) and addr in _SHARED_CGNAT:
        return AddressKind.PRIVATE
    if addr.is_private:
        # is_private also covers documentation / benchmarking ranges; call those reserved.
        if addr.is_reserved or not _is_rfc_private(addr):
            return AddressKind.RESERVED
        return AddressKind.PRIVATE
    if addr.is_reserved or not addr.is_global:
        return AddressKind.RESERVED
    return AddressKind.PUBLIC


_RFC_PRIVATE = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)


def _is_rfc_private(addr: IPAddress) -> bool:
    return any(addr.version == net.version and addr in net for net in _RFC_PRIVATE)


def address_allowed(kind: AddressKind, *, allow_loopback: bool) -> bool:
    """Public addresses always; loopback only in local development; nothing else ever."""
    if kind is AddressKind.PUBLIC:
        return True
    return kind is AddressKind.LOOPBACK and allow_loopback


def addresses_allowed(addresses: Iterable[str], *, allow_loopback: bool) -> str | None:
    """None if every address may be reached, else the reason the first one may not."""
    seen = False
    for address in addresses:
        seen = True
        kind = classify_address(address)
        if not address_allowed(kind, allow_loopback=allow_loopback):
            return f"{address} is a {kind.value.replace('_', '-')} address"
    return None if seen else "the host did not resolve to any address"


def literal_address(host: str) -> IPAddress | None:
    """The host as an IP address if it is one (brackets of IPv6 URLs already removed)."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0] if ":" in host else host)
    except ValueError:
        return None


UNRESOLVED_PREFIX = "could not resolve"

Resolver = Callable[[str], Awaitable[list[str]]]


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str | None = None


class EgressGuard:
    """Per-job URL check with a resolution cache (one DNS lookup per host per job)."""

    def __init__(self, *, allow_loopback: bool, resolver: Resolver) -> None:
        self._allow_loopback = allow_loopback
        self._resolve = resolver
        self._hosts: dict[str, Verdict] = {}
        self.refusals: list[str] = []

    async def check(self, url: str) -> Verdict:
        try:
            parts = urlsplit(url)
        except ValueError:
            return self._refuse(f"{url[:200]!r} is not a valid URL")
        scheme = parts.scheme.lower()
        if scheme in _LOCAL_SCHEMES:
            return Verdict(True)
        if scheme not in ALLOWED_SCHEMES:
            return self._refuse(
                f"scheme {scheme or '(none)'!r} is not allowed; only http and https"
            )
        host = (parts.hostname or "").lower()
        if not host:
            return self._refuse(f"{url[:200]!r} has no host")
        verdict = self._hosts.get(host)
        if verdict is None:
            verdict = await self._check_host(host)
            if not (verdict.reason or "").startswith(UNRESOLVED_PREFIX):
                self._hosts[host] = verdict  # a failed lookup is not cached: it may be transient
        if not verdict.allowed:
            self.refusals.append(verdict.reason or host)
        return verdict

    async def _check_host(self, host: str) -> Verdict:
        literal = literal_address(host)
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                addresses = await self._resolve(host)
            except OSError as exc:
                # Refused rather than waved through (Chromium's own lookup could differ),
                # and marked so the caller can treat it as a transient failure.
                return Verdict(False, f"{UNRESOLVED_PREFIX} {host}: {exc.strerror or exc}")
        reason = addresses_allowed(addresses, allow_loopback=self._allow_loopback)
        if reason is None:
            return Verdict(True)
        return Verdict(False, f"requests to {host} are not allowed: {reason}")

    def _refuse(self, reason: str) -> Verdict:
        self.refusals.append(reason)
        return Verdict(False, reason)


def system_resolver() -> Resolver:
    import asyncio

    async def resolve(host: str) -> list[str]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
        return sorted({str(info[4][0]) for info in infos})

    return resolve
