"""The client's TLS context: httpx's default (certifi's CAs, as ``trust_env=False`` makes
it), made once per process. Each one reads the whole CA bundle (~15 ms of CPU), and the
remote MCP route (``POST /v1/mcp``) makes a client, two contexts before this, per request."""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=False)
