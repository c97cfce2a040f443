"""HTTP on the egress proxy's wire: refusals, request targets and heads rewritten for one
request per connection. Pure helpers, apart from writing a refusal."""

from __future__ import annotations

import asyncio
import contextlib
from typing import NamedTuple
from urllib.parse import urlsplit

# Why a refusal happened, sent to the browser (X-Pagefleet-Egress-Kind) and kept in Decision.
POLICY = "policy"  # the egress policy forbids the target (or the upstream proxy)
UNREACHABLE = "unreachable"  # the target (or the upstream) could not be reached
UNRESOLVED = "unresolved"  # the target's name does not resolve: the job's mistake, not the site's
UPSTREAM_AUTH = "upstream_auth"  # the job's upstream proxy rejected its credentials (407)
UPSTREAM_REFUSED = "upstream_refused"  # the job's upstream proxy refused the tunnel
SCHEME = "scheme"  # not http(s): refused by the job's own checks, never reaches a proxy
KIND_HEADER = "X-Pagefleet-Egress-Kind"


class Refused(Exception):
    def __init__(self, status: int, reason: str, kind: str = POLICY) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.kind = kind


REFUSAL_HEADER = "X-Pagefleet-Egress-Reason"
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    }
)


# --- HTTP head helpers -------------------------------------------------------------------
def split_authority(authority: str, *, default_port: int) -> tuple[str, int]:
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise Refused(400, "malformed IPv6 authority")
        host, rest = authority[1:end], authority[end + 1 :]
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = authority.rpartition(":") if ":" in authority else (authority, "", "")
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise Refused(400, f"bad port in {authority[:100]!r}") from None
    return host, port


def absolute_target(target: str) -> tuple[str, int, str]:
    """(host, port, origin-form path) of ``http://host:port/path?q``; only http and ws."""
    try:
        parts = urlsplit(target)
        port = parts.port
    except ValueError:
        raise Refused(400, "malformed request target") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "ws"):
        raise Refused(400, f"the proxy forwards http only, not {scheme or 'origin-form'!r}")
    host = parts.hostname or ""
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return host, port or 80, path


class OriginRequest(NamedTuple):
    head: bytes  # the request's head as the origin server should see it
    upgrade: bool  # it asks for a WebSocket: both ways stay open
    # A body follows the head (RFC 9112, section 6.3: a request has one only when it says
    # Content-Length or Transfer-Encoding), so the client's side must be copied on.
    body: bool


def origin_request(method: str, path: str, version: str, header_lines: list[str]) -> OriginRequest:
    """The request as the origin server should see it (one request, then the close)."""
    headers: list[str] = []
    upgrade: str | None = None
    body = False
    for line in header_lines:
        if not line:
            continue
        name, _, value = line.partition(":")
        lname = name.strip().lower()
        if lname == "upgrade":
            upgrade = value.strip()
        elif lname == "transfer-encoding" or (lname == "content-length" and value.strip() != "0"):
            body = True
        if lname in _HOP_BY_HOP:
            continue
        headers.append(line)
    if upgrade and upgrade.lower() == "websocket":
        headers += [f"Upgrade: {upgrade}", "Connection: Upgrade"]
    else:
        upgrade = None
        headers.append("Connection: close")
    head = f"{method} {path} {version}\r\n" + "\r\n".join(headers) + "\r\n\r\n"
    return OriginRequest(head.encode("latin-1"), upgrade is not None, body)


def close_response_head(head: bytes) -> bytes:
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")
    if len(status) > 1 and status[1] == "101":
        return head  # switching protocols: the Connection/Upgrade headers are the point
    kept = [
        line
        for line in lines[1:]
        if line and line.partition(":")[0].strip().lower() not in _HOP_BY_HOP
    ]
    kept += ["Connection: close", "Proxy-Connection: close"]
    return ("\r\n".join([lines[0], *kept]) + "\r\n\r\n").encode("latin-1")


def safe_header_value(text: str) -> str:
    clean = "".join(c if 32 <= ord(c) < 127 else "?" for c in text)
    return clean[:300]


_STATUS_TEXT = {
    400: "Bad Request",
    403: "Forbidden",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


async def reply(writer: asyncio.StreamWriter, status: int, reason: str, kind: str = POLICY) -> None:
    body = f"pagefleet egress proxy: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {_STATUS_TEXT.get(status, 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"{REFUSAL_HEADER}: {safe_header_value(reason)}\r\n"
        f"{KIND_HEADER}: {kind}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\nProxy-Connection: close\r\n\r\n"
    )
    with contextlib.suppress(ConnectionError, RuntimeError):
        writer.write(head.encode("latin-1") + body)
        await writer.drain()


def close_writer(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
