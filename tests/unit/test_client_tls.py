"""The client's TLS: certificates verified against certifi's CAs, with one context per process
(the remote MCP route makes a client for every request)."""

from __future__ import annotations

import ssl
from typing import Any

import certifi
import pytest

from pagefleet.client import PagefleetClient
from pagefleet.client.tls import tls_context


def test_clients_share_one_context_that_verifies_against_certifi(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[tuple[ssl.SSLContext, dict[str, Any]]] = []
    real = ssl.create_default_context

    def recording(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        context = real(*args, **kwargs)
        made.append((context, kwargs))
        return context

    monkeypatch.setattr(ssl, "create_default_context", recording)
    tls_context.cache_clear()  # made again here, under the recorder

    for _ in range(3):
        with PagefleetClient("https://api.example.test", "key"):
            pass

    assert len(made) == 1, f"{len(made)} TLS contexts for 3 clients"
    context, kwargs = made[0]
    assert kwargs == {"cafile": certifi.where()}
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
