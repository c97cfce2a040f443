"""A refused egress request is logged with what was refused and why (no browser)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from browser_task.egress_proxy import EgressProxy
from tests.worker.test_ssrf import POLICY, LoopbackOnlyConnector, TableResolver


def test_a_refusal_is_logged_with_host_port_and_reason(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        proxy = EgressProxy(POLICY, TableResolver(), connect=LoopbackOnlyConnector())
        await proxy.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            target = "169.254.169.254:80"
            writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            await asyncio.wait_for(reader.read(), 5)
            writer.close()
        finally:
            await proxy.close()

    with caplog.at_level(logging.WARNING, logger="pagefleet.egress"):
        asyncio.run(go())
    [record] = [r for r in caplog.records if r.getMessage().startswith("egress refused")]
    line = record.getMessage()
    assert "169.254.169.254:80" in line and "not allowed" in line, line
    assert (record.host, record.port, record.kind) == ("169.254.169.254", 80, "policy")
    assert "not allowed" in record.reason
