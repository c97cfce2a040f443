"""Egress policy: which addresses pagefleet may send traffic to on a tenant's behalf (SSRF).

Pure functions of an address or a host name, tested without opening any connection. The
browser's traffic (``browser_task.egress.guard`` and its forwarding proxy) and the webhooks
pagefleet POSTs to tenants' URLs (``pagefleet.notify``) apply this one policy: public
addresses only, plus loopback when the deployment is configured for local development.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOWED_SCHEMES = frozenset({"http", "https"})

# NAT64 well-known prefix: 64:ff9b::a.b.c.d reaches IPv4 a.b.c.d through a translator.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SHARED_CGNAT = ipaddress.ip_network("100.64.0.0/10")

# Names of cloud metadata services. They resolve to link-local addresses (refused anyway),
# but refusing the name means we never even ask DNS about them.
METADATA_HOSTNAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
        "metadata.packet.net",
        "metadata.tencentyun.com",
        "100-100-100-200.aliyun",
    }
)


class AddressKind(StrEnum):
    PUBLIC = "public"
    LOOPBACK = "loopback"
    PRIVATE = "private"
    LINK_LOCAL = "link_local"  # includes 169.254.169.254, the cloud metadata endpoint
    MULTICAST = "multicast"
    UNSPECIFIED = "unspecified"
    RESERVED = "reserved"


def _embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, NAT64, 6to4), judged in its place."""
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr in _NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr.sixtofour is not None:
        return addr.sixtofour
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
    return EgressPolicy(allow_loopback=allow_loopback).addresses_reason(addresses)


@dataclass(frozen=True)
class EgressPolicy:
    """Which addresses the browser may reach.

    Production: public addresses only, plus all of loopback when ``allow_loopback`` (the
    local stack's demo site). ``allowed_loopback`` lets tests allow a few loopback addresses
    (say 127.0.0.2) while the rest of 127/8 and ::1 stay forbidden, so SSRF tests run end to
    end without any traffic leaving the machine. It accepts loopback addresses only, so it
    can never open a private, link-local or metadata range.
    """

    allow_loopback: bool = False
    allowed_loopback: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        for value in self.allowed_loopback:
            if classify_address(value) is not AddressKind.LOOPBACK:
                raise ValueError(f"allowed_loopback takes loopback addresses only, not {value}")

    def address_reason(self, value: str | IPAddress) -> str | None:
        """None if the address may be reached, else why not."""
        addr = ipaddress.ip_address(value) if isinstance(value, str) else value
        kind = classify_address(addr)
        if address_allowed(kind, allow_loopback=self.allow_loopback):
            return None
        if kind is AddressKind.LOOPBACK and self.allowed_loopback:
            plain = _embedded_ipv4(addr) if isinstance(addr, ipaddress.IPv6Address) else None
            if str(plain or addr) in self.allowed_loopback:
                return None
        return f"{addr} is a {kind.value.replace('_', '-')} address"

    def addresses_reason(self, addresses: Iterable[str | IPAddress]) -> str | None:
        """None if EVERY address may be reached (one bad answer refuses the host)."""
        seen = False
        for address in addresses:
            seen = True
            reason = self.address_reason(address)
            if reason is not None:
                return reason
        return None if seen else "the host did not resolve to any address"

    @staticmethod
    def host_reason(host: str) -> str | None:
        """Names refused before any lookup: cloud metadata services, and names that cannot
        be a site's (``hostname_problem``)."""
        host = normalize_host(host)
        if host in METADATA_HOSTNAMES:
            return f"{host} is a cloud metadata service"
        problem = hostname_problem(host)
        if problem is not None:
            return f"{host[:100]!r} is not a host name: {problem}"
        return None


def normalize_host(host: str) -> str:
    """Lower case, no IPv6 brackets, no trailing root dot."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host[:-1] if host.endswith(".") and not host.endswith("..") else host


def _ipv4_number(part: str) -> int | None:
    """One dotted part as the WHATWG URL parser (and inet_aton) reads it: 0x.. hex, 0.. octal."""
    if not part:
        return None
    base, digits = 10, part
    if part[:2] in ("0x", "0X"):
        base, digits = 16, part[2:] or "0"
    elif len(part) > 1 and part[0] == "0":
        base, digits = 8, part[1:]
    try:
        return int(digits, base) if digits.isalnum() else None
    except ValueError:
        return None


def parse_ipv4_loose(host: str) -> ipaddress.IPv4Address | None:
    """Odd IPv4 spellings browsers and libc accept: 2130706433, 0x7f000001, 0177.0.0.1, 127.1.

    The proxy normally sees Chromium's canonical form, but a host reaching the policy in any
    of these spellings must be judged as the address it names, not looked up as a name.
    """
    parts = host.split(".")
    if len(parts) > 4:
        return None
    numbers = [_ipv4_number(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    values = [n for n in numbers if n is not None]
    *head, last = values
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(values)):
        return None
    value = last
    for index, n in enumerate(head):
        value += n << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def is_loopback_name(host: str) -> bool:
    """``localhost`` and every name under it: loopback by definition (RFC 6761 6.3)."""
    return host == "localhost" or host.endswith(".localhost")


def literal_address(host: str) -> IPAddress | None:
    """The host as an IP address if it is one, in any spelling (brackets optional).

    ``localhost`` names count as 127.0.0.1: they are loopback by definition, and asking a
    resolver about ``foo.localhost`` would send the name to DNS.
    """
    host = normalize_host(host)
    if is_loopback_name(host):
        return ipaddress.IPv4Address("127.0.0.1")
    try:
        return ipaddress.ip_address(host.split("%", 1)[0] if ":" in host else host)
    except ValueError:
        pass
    return None if ":" in host else parse_ipv4_loose(host)


# Special-use names that never name a site on the internet: asking a resolver about them asks
# the local network (mDNS, search domains, the VPC's resolver), so they are refused unasked.
_LOCAL_ONLY_SUFFIXES = ("invalid", "local", "localdomain", "internal", "home.arpa", "onion", "alt")
_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")


def hostname_problem(host: str) -> str | None:
    """Why a host (``normalize_host``'d) cannot be a site's, judged on its face before any
    lookup: None when it may be one (an IP literal in any spelling, or a DNS name).

    Browsers decode percent-escapes and read numbers in hosts their own way, so a host that
    only makes sense after such a reading (``127.0.0.1%2e``, ``%31%32%37.0.0.1``) is refused
    rather than resolved as a name; so are empty labels (``a..b``, a second trailing dot),
    characters no host name has, a last label that is a number but no IPv4 address
    (``1.2.3.4.5``), single-label names (the resolver's search domains complete them into
    the local network's names) and special-use domains (``.local``, ``.internal``, ...).
    """
    if not host:
        return "it is empty"
    if ":" in host:  # only an IPv6 literal has colons
        if "%" in host:
            return "an IPv6 zone id names a local interface"
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "it is not a valid IPv6 address"
        return None
    if "%" in host:
        return "percent-encoding has no place in a host name"
    if parse_ipv4_loose(host) is not None:
        return None
    try:
        name = host if host.isascii() else host.encode("idna").decode("ascii")
    except UnicodeError:
        return "it is not a valid internationalized domain name"
    return _dns_name_problem(name)


def _dns_name_problem(name: str) -> str | None:
    if len(name) > 253:
        return "it is longer than 253 characters"
    labels = name.split(".")
    if "" in labels:
        return "it has an empty label"
    if not all(_LABEL.fullmatch(label) for label in labels):
        return "a label has characters no host name has, or more than 63"
    if is_loopback_name(name):
        return None
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        return "it ends in a number but is not an IPv4 address"
    if len(labels) == 1:
        return "a single-label name is completed by the resolver's local search domains"
    for suffix in _LOCAL_ONLY_SUFFIXES:
        if name == suffix or name.endswith("." + suffix):
            return f".{suffix} names are never on the internet"
    return None


# --- URLs pagefleet itself calls (webhooks): checked on their face, then after resolution ---
URL_MAX_CHARS = 2000

# Resolves a host name to its addresses (``socket.getaddrinfo`` in production).
SyncResolver = Callable[[str], list[str]]


class EgressRefused(ValueError):
    """The URL may not be called. ``transient``: the host did not resolve (try later)."""

    def __init__(self, reason: str, *, transient: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient


@dataclass(frozen=True)
class CheckedTarget:
    """Where a checked URL may be reached: connect to one of ``addresses``, nothing else,
    so a second lookup (DNS rebinding) cannot send the request somewhere else."""

    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]


def target_problem(url: str, max_chars: int = URL_MAX_CHARS) -> str | None:
    """What keeps a URL from being a target pagefleet may reach, on its face (no lookup):
    too long, not a URL, not http(s), no host. None when nothing."""
    if len(url) > max_chars:
        return f"the URL is longer than {max_chars} characters"
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a bad port
    except ValueError as exc:
        return f"not a URL: {exc}"
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        return "the URL must be http:// or https://"
    if not parts.hostname:
        return "the URL has no host"
    return None


def url_problem(url: str) -> str | None:
    """What is wrong with a callback URL on its face (no lookup): None when nothing."""
    problem = target_problem(url)
    if problem is not None:
        return problem
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        return "the URL may not carry credentials; the request is signed instead"
    if parts.fragment:
        return "the URL may not have a #fragment"
    if any(ch.isspace() for ch in url):
        return "the URL may not contain white space"
    return None


def check_url(url: str, policy: EgressPolicy, resolve: SyncResolver) -> CheckedTarget:
    """The URL's target after the policy's checks; raises ``EgressRefused`` with the reason.

    Metadata names are refused before any lookup; a literal address (in any spelling) is
    judged as the address it names; a name must resolve, and EVERY address it resolves to
    must be allowed.
    """
    problem = url_problem(url)
    if problem is not None:
        raise EgressRefused(problem)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = normalize_host(parts.hostname or "")
    port = parts.port or (443 if scheme == "https" else 80)
    named = EgressPolicy.host_reason(host)
    if named is not None:
        raise EgressRefused(f"{host} is not allowed: {named}")
    literal = literal_address(host)
    if literal is not None:
        addresses = [str(literal)]
    else:
        try:
            addresses = resolve(host)
        except OSError as exc:
            unresolved = f"could not resolve {host}: {exc.strerror or exc}"
            raise EgressRefused(unresolved, transient=True) from None
    refusal = policy.addresses_reason(addresses)
    if refusal is not None:
        raise EgressRefused(f"{host} is not allowed: {refusal}")
    return CheckedTarget(scheme, host, port, tuple(addresses))


def system_lookup(host: str) -> list[str]:
    """Every address ``host`` resolves to (TCP), as the connection would see them."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})
