"""A refused egress request is logged with what was refused and why (no browser)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from browser_task.egress.log import EgressLog
from browser_task.egress.proxy import Decision, EgressProxy
from browser_task.observe.telemetry import JobLog
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


# --- put down to the right job ----------------------------------------------------------------
class _Request:
    def __init__(self, url: str) -> None:
        self.url = url


def _refusal(host: str, port: int) -> Decision:
    return Decision(0.0, "CONNECT", host, port, False, None, "not allowed", "policy")


def test_the_shared_proxys_refusals_go_to_the_job_that_asked() -> None:
    egress = EgressLog()
    seen: list[tuple[str, str]] = []

    def job(name: str) -> JobLog:
        log = JobLog(job_id=name)
        return log.recording(lambda _level, message, fields: seen.append((name, fields["host"])))

    async def go() -> None:
        a, b = egress.track(job("a")), egress.track(job("b"))
        a.on_request(_Request("https://evil.test/x"))
        b.on_request(_Request("http://other.test:8080/y"))
        egress.proxy_refused(_refusal("evil.test", 443))
        egress.proxy_refused(_refusal("other.test", 8080))
        egress.proxy_refused(_refusal("nobody.test", 443))  # asked by neither: nobody's
        deadline = asyncio.get_running_loop().time() + 30
        while len(seen) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        egress.done(b)
        egress.proxy_refused(_refusal("late.test", 443))  # a still runs, b ended: a's
        while len(seen) < 3 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)

    asyncio.run(go())
    assert sorted(seen) == [("a", "evil.test"), ("a", "late.test"), ("b", "other.test")]


def test_a_refusal_waits_for_the_report_of_the_job_that_asked_however_late() -> None:
    """On a loaded machine Chromium's report of a request can come long after the proxy
    refused its connection: the refusal is still put down to the job that asked."""
    egress = EgressLog()
    seen: list[tuple[str, str]] = []

    def job(name: str) -> JobLog:
        log = JobLog(job_id=name)
        return log.recording(lambda _level, message, fields: seen.append((name, fields["host"])))

    async def go() -> None:
        a, b = egress.track(job("a")), egress.track(job("b"))
        b.on_request(_Request("http://other.test:8080/y"))
        egress.proxy_refused(_refusal("slow.test", 443))
        await asyncio.sleep(1.5)  # the report comes late (longer than any fixed wait)
        assert seen == []  # not put down to anyone meanwhile
        a.on_request(_Request("https://slow.test/x"))

    asyncio.run(go())
    assert seen == [("a", "slow.test")]
