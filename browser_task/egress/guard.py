"""Egress guard for a job's browser (SSRF): the URL checks of the worker.

The address rules live in ``pagefleet.targets.egress_policy`` (shared with the webhooks pagefleet
sends) and are re-exported here. They are enforced in two places:

- ``browser_task.egress.proxy``: the forwarding proxy every request of Chromium goes
  through. It resolves each host itself, checks every address, and connects to the checked
  address, so WebSockets, service workers, redirects and DNS rebinding cannot slip past.
  This is the boundary.
- ``EgressGuard``: a per-job check of URLs the workflow names (``goto``) so a refusal gets a
  clear job error before the browser is involved, plus the scheme check the job context's
  request watch applies (non-http(s) requests never reach a proxy).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from browser_task.egress.http import POLICY, SCHEME, UNRESOLVED
from pagefleet.targets.egress_policy import (
    ALLOWED_SCHEMES,
    METADATA_HOSTNAMES,
    AddressKind,
    EgressPolicy,
    IPAddress,
    address_allowed,
    addresses_allowed,
    classify_address,
    literal_address,
    normalize_host,
    parse_ipv4_loose,
)

__all__ = [
    "ALLOWED_SCHEMES",
    "METADATA_HOSTNAMES",
    "UNRESOLVED_PREFIX",
    "AddressKind",
    "EgressGuard",
    "EgressPolicy",
    "IPAddress",
    "RefusalSink",
    "Resolver",
    "Verdict",
    "address_allowed",
    "addresses_allowed",
    "classify_address",
    "literal_address",
    "normalize_host",
    "parse_ipv4_loose",
    "system_resolver",
]

# Schemes a page may use without any network request leaving the browser.
_LOCAL_SCHEMES = frozenset({"data", "blob", "about"})

UNRESOLVED_PREFIX = "could not resolve"

Resolver = Callable[[str], Awaitable[list[str]]]
# Told of each refusal: host, port (None: the URL has none), kind, reason.
RefusalSink = Callable[[str, int | None, str, str], None]


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str | None = None


class EgressGuard:
    """Per-job URL check with a resolution cache (one DNS lookup per host per job).

    Used for the URLs a workflow names, to fail a job early with a clear message; the
    egress proxy enforces the same policy on every connection the browser makes.
    """

    def __init__(
        self,
        *,
        allow_loopback: bool = False,
        resolver: Resolver,
        policy: EgressPolicy | None = None,
        on_refusal: RefusalSink | None = None,
    ) -> None:
        self._policy = policy or EgressPolicy(allow_loopback=allow_loopback)
        self._resolve = resolver
        self._hosts: dict[str, Verdict] = {}
        self.refusals: list[str] = []
        # Set by the context's scheme watch: why the job's browser context was stopped.
        self.stopped: str | None = None
        # Where the job's refusals go (the worker's log, with the job's keys: egress.log).
        self._on_refusal = on_refusal

    def check_scheme(self, url: str) -> Verdict:
        """The scheme part of the check alone: no lookup, cheap enough for every request."""
        scheme = url.split(":", 1)[0].lower() if ":" in url else ""
        if scheme in _LOCAL_SCHEMES or scheme in ALLOWED_SCHEMES:
            return Verdict(True)
        return self._refuse(
            f"scheme {scheme or '(none)'!r} is not allowed; only http and https",
            kind=SCHEME,
            url=url,
        )

    async def check(self, url: str) -> Verdict:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return self._refuse(f"{url[:200]!r} is not a valid URL")
        scheme = parts.scheme.lower()
        if scheme in _LOCAL_SCHEMES:
            return Verdict(True)
        if scheme not in ALLOWED_SCHEMES:
            return self._refuse(
                f"scheme {scheme or '(none)'!r} is not allowed; only http and https",
                kind=SCHEME,
                url=url,
            )
        host = normalize_host(parts.hostname or "")
        if not host:
            return self._refuse(f"{url[:200]!r} has no host")
        verdict = self._hosts.get(host)
        if verdict is None:
            verdict = await self._check_host(host)
            if not (verdict.reason or "").startswith(UNRESOLVED_PREFIX):
                self._hosts[host] = verdict  # a failed lookup is not cached: it may be transient
        if not verdict.allowed:
            reason = verdict.reason or host
            self.refusals.append(reason)
            kind = UNRESOLVED if reason.startswith(UNRESOLVED_PREFIX) else POLICY
            self._report(host, port or (443 if scheme == "https" else 80), kind, reason)
        return verdict

    async def _check_host(self, host: str) -> Verdict:
        named = self._policy.host_reason(host)
        if named is not None:
            return Verdict(False, f"requests to {host} are not allowed: {named}")
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
        reason = self._policy.addresses_reason(addresses)
        if reason is None:
            return Verdict(True)
        return Verdict(False, f"requests to {host} are not allowed: {reason}")

    def _refuse(self, reason: str, *, kind: str = POLICY, url: str = "") -> Verdict:
        self.refusals.append(reason)
        host = ""
        with contextlib.suppress(ValueError):
            host = normalize_host(urlsplit(url).hostname or "")
        self._report(host, None, kind, reason)
        return Verdict(False, reason)

    def _report(self, host: str, port: int | None, kind: str, reason: str) -> None:
        if self._on_refusal is not None:
            self._on_refusal(host, port, kind, reason)


def system_resolver() -> Resolver:
    async def resolve(host: str) -> list[str]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
        return sorted({str(info[4][0]) for info in infos})

    return resolve
