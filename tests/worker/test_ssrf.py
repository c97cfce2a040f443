"""SSRF end to end: real Chromium through the egress proxy, with loopback forbidden.

Everything here is loopback. The test policy allows exactly one loopback address, 127.0.0.2
(the "public" site), and forbids the rest of 127/8 and ::1, where a "secret" site listens on
the same port. The resolver is a table (never the system's DNS) and the proxy's connector
refuses anything that is not loopback and records every address it was asked to dial, so a
broken guard could still never send a byte off this machine.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import http.server
import ipaddress
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from browser_task.browser.pool import BrowserPool, JobBrowser
from browser_task.egress.guard import EgressGuard, EgressPolicy
from browser_task.egress.http import REFUSAL_HEADER, Refused
from browser_task.egress.proxy import (
    EgressProxy,
    Streams,
    UpstreamProxy,
    open_tcp,
)
from browser_task.errors import FailJob
from browser_task.run.context import RunContext
from browser_task.run.executor import run_steps, scheme_guard
from browser_task.run.plan import RunPlan
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.options import JobOptions
from pagefleet.specs.pools import PoolProxy
from pagefleet.specs.settings import WorkerSettings
from pagefleet.workflow import Extract
from pagefleet.workflow.masking import Masker
from tests.support.upstream_proxy import upstream_proxy

pytestmark = pytest.mark.e2e

ALLOWED = "127.0.0.2"
POLICY = EgressPolicy(allow_loopback=False, allowed_loopback=frozenset({ALLOWED}))
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


# --- sites -----------------------------------------------------------------------------------
class CountingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], family: int, pages: dict[str, str]) -> None:
        self.address_family = family
        self.pages = pages
        self.connections = 0
        self.paths: list[str] = []
        super().__init__(address, Handler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.connections += 1  # counted at accept: even a bare connect shows up
        return True


class Handler(http.server.BaseHTTPRequestHandler):
    server: CountingServer

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        self.server.paths.append(path)
        if path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            self._websocket()
            return
        if path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", self.path.split("to=", 1)[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.server.pages.get(path, "<h1 id=h>public page</h1>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _websocket(self) -> None:
        key = self.headers["Sec-WebSocket-Key"]
        digest = hashlib.sha1((key + WS_GUID).encode()).digest()  # noqa: S324 (RFC 6455)
        accept = base64.b64encode(digest).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.write(b"\x81\x05hello")  # one unmasked text frame
        self.wfile.flush()
        with contextlib.suppress(OSError):
            self.rfile.read(2)  # hold the socket until the client goes

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Sites:
    def __init__(self) -> None:
        self.port = 0
        self.public: CountingServer
        self.secret_v4: CountingServer
        self.secret_v6: CountingServer

    def url(self, path: str = "/", host: str = ALLOWED) -> str:
        return f"http://{host}:{self.port}{path}"

    @property
    def secret_connections(self) -> int:
        return self.secret_v4.connections + self.secret_v6.connections


@pytest.fixture(scope="module")
def sites() -> Iterator[Sites]:
    """The same port on 127.0.0.2 (allowed), 127.0.0.1 and ::1 (forbidden, "secret")."""
    pages = {
        "/secret": "<h1 id=h>SECRET</h1>",
        "/fetch": "<h1 id=h>fetch</h1>",
    }
    servers: list[CountingServer] = []
    sites = Sites()
    for _ in range(20):
        try:
            public = CountingServer((ALLOWED, 0), socket.AF_INET, pages)
            port = public.server_address[1]
            servers = [
                public,
                CountingServer(("127.0.0.1", port), socket.AF_INET, pages),
                CountingServer(("::1", port), socket.AF_INET6, pages),
            ]
            break
        except OSError:
            for server in servers:
                server.server_close()
            servers = []
    assert servers, "no port free on 127.0.0.2, 127.0.0.1 and ::1 at once"
    sites.public, sites.secret_v4, sites.secret_v6 = servers
    sites.port = int(port)
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield sites
    for server in servers:
        server.shutdown()
        server.server_close()


# --- resolver and connector that can only ever reach loopback ---------------------------------
class TableResolver:
    """Names from a table; a list of answers per name is served one lookup at a time."""

    def __init__(self) -> None:
        self.table: dict[str, list[list[str]]] = {}
        self.calls: list[str] = []

    def set(self, name: str, *answers: list[str]) -> None:
        self.table[name] = list(answers)

    async def __call__(self, host: str) -> list[str]:
        self.calls.append(host)
        answers = self.table.get(host)
        if not answers:
            raise OSError(-2, "not in the test's table (no real DNS here)")
        return answers.pop(0) if len(answers) > 1 else answers[0]


class LoopbackOnlyConnector:
    def __init__(self) -> None:
        self.dialled: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Streams:
        self.dialled.append((host, port))
        if not ipaddress.ip_address(host).is_loopback:
            raise OSError("test connector: non-loopback address refused")
        return await open_tcp(host, port)


# --- the browser, on its own loop thread for the whole module ---------------------------------
class Harness:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.resolver = TableResolver()
        self.connector = LoopbackOnlyConnector()
        settings = WorkerSettings(
            jobs_table="t",
            tenants_table="t",
            artifacts_bucket="b",
            queue_urls={},
            allow_loopback=False,
        )
        self.pool = BrowserPool(
            settings, resolver=self.resolver, policy=POLICY, connect=self.connector
        )

    def run(self, coro: Awaitable[Any], timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(_wrap(coro), self.loop).result(timeout)

    def page_test(self, body: Callable[[JobBrowser], Awaitable[Any]]) -> Any:
        async def go() -> Any:
            # The same context setup the worker gives every job.
            self.guard = guard = EgressGuard(resolver=self.resolver, policy=POLICY)
            session = await self.pool.new_session(
                JobOptions(navigation_timeout_ms=10_000), setup=scheme_guard(guard)
            )
            try:
                return await body(session)
            finally:
                await session.close()

        return self.run(go())


async def _wrap(coro: Awaitable[Any]) -> Any:
    return await coro


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    h = Harness()
    h.thread.start()
    h.run(h.pool.start())
    try:
        yield h
    finally:
        h.run(h.pool.close())
        h.loop.call_soon_threadsafe(h.loop.stop)
        h.thread.join(10)


@pytest.fixture(autouse=True)
def _never_off_loopback(harness: Harness) -> Iterator[None]:
    yield
    for host, _port in harness.connector.dialled:
        assert ipaddress.ip_address(host).is_loopback, f"the proxy dialled {host}"


def refusals_for(harness: Harness, host: str) -> list[str]:
    return [
        d.reason or "" for d in harness.pool.egress.decisions if d.host == host and not d.allowed
    ]


# --- navigations to forbidden loopback spellings -------------------------------------------
@pytest.mark.parametrize(
    ("host", "seen_as"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("2130706433", "127.0.0.1"),  # decimal
        ("0x7f000001", "127.0.0.1"),  # hex
        ("0x7f.0.0.1", "127.0.0.1"),  # hex part
        ("0177.0.0.1", "127.0.0.1"),  # octal
        ("127.1", "127.0.0.1"),  # short form
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),  # IPv4-mapped IPv6
        ("127.0.0.1.", "127.0.0.1"),  # trailing dot
    ],
)
def test_navigation_to_forbidden_loopback_spellings_is_refused(harness, sites, host, seen_as):
    before = sites.secret_connections

    async def body(session: JobBrowser) -> Any:
        response = await session.page.goto(sites.url("/secret", host))
        return (
            response.status,
            response.headers.get(REFUSAL_HEADER.lower()),
            await session.page.content(),
        )

    status, reason, content = harness.page_test(body)
    assert status == 403
    assert reason is not None and "loopback" in reason
    assert "SECRET" not in content
    assert sites.secret_connections == before
    assert refusals_for(harness, seen_as.strip("[]").removesuffix(".")) or refusals_for(
        harness, host.strip("[]")
    )


def test_allowed_origin_loads_through_the_proxy(harness, sites):
    async def body(session: JobBrowser) -> Any:
        response = await session.page.goto(sites.url("/"))
        return response.status, await session.page.inner_text("#h")

    assert harness.page_test(body) == (200, "public page")
    assert any(d.allowed and d.address == ALLOWED for d in harness.pool.egress.decisions)


def test_hostnames_resolving_to_forbidden_addresses_are_refused(harness, sites):
    harness.resolver.set("evil.test", ["127.0.0.1"])
    harness.resolver.set("localhost", ["127.0.0.1", "::1"])
    harness.resolver.set("mixed.test", [ALLOWED, "127.0.0.1"])  # one bad answer is enough
    before = sites.secret_connections
    for name in ("evil.test", "localhost", "mixed.test"):

        async def body(session: JobBrowser, name: str = name) -> Any:
            response = await session.page.goto(sites.url("/secret", name))
            return response.status, await session.page.content()

        status, content = harness.page_test(body)
        assert status == 403, name
        assert "SECRET" not in content
        assert refusals_for(harness, name), name
    assert sites.secret_connections == before
    assert sites.public.paths.count("/secret") == 0  # mixed.test did not go to 127.0.0.2 either


def test_metadata_hostname_is_refused_without_a_lookup(harness, sites):
    async def body(session: JobBrowser) -> Any:
        response = await session.page.goto(f"http://metadata.google.internal:{sites.port}/x")
        return response.status

    assert harness.page_test(body) == 403
    assert "metadata.google.internal" not in harness.resolver.calls
    assert "metadata" in refusals_for(harness, "metadata.google.internal")[0]


def test_redirect_from_an_allowed_origin_to_a_forbidden_one_is_refused(harness, sites):
    before = sites.secret_connections

    async def body(session: JobBrowser) -> Any:
        target = sites.url("/secret", "127.0.0.1")
        response = await session.page.goto(sites.url(f"/redirect?to={target}"))
        return response.status, await session.page.content()

    status, content = harness.page_test(body)
    assert status == 403 and "SECRET" not in content
    assert sites.secret_connections == before


def test_fetch_iframe_and_websocket_from_an_allowed_page_are_refused(harness, sites):
    before = sites.secret_connections
    secret = sites.url("/secret", "127.0.0.1")
    ws_secret = f"ws://127.0.0.1:{sites.port}/ws"
    ws_public = f"ws://{ALLOWED}:{sites.port}/ws"

    async def body(session: JobBrowser) -> Any:
        page = session.page
        await page.goto(sites.url("/"))
        fetched = await page.evaluate(
            """async url => {
                try { const r = await fetch(url, {mode: 'no-cors'}); return 'status ' + r.status; }
                catch (e) { return 'error'; } }""",
            secret,
        )
        await page.evaluate(
            """url => new Promise(done => {
                const f = document.createElement('iframe'); f.src = url; f.onload = done;
                document.body.appendChild(f); setTimeout(done, 3000); })""",
            secret,
        )
        frame_texts = [await f.content() for f in page.frames[1:]]
        socket_script = """url => new Promise(done => {
            const ws = new WebSocket(url);
            ws.onmessage = e => { done('message ' + e.data); ws.close(); };
            ws.onerror = () => done('error');
            setTimeout(() => done('timeout'), 5000); })"""
        ws_forbidden = await page.evaluate(socket_script, ws_secret)
        ws_allowed = await page.evaluate(socket_script, ws_public)
        return fetched, frame_texts, ws_forbidden, ws_allowed

    fetched, frame_texts, ws_forbidden, ws_allowed = harness.page_test(body)
    # no-cors hides the status; either way nothing reached the secret server.
    assert fetched in ("error", "status 0")
    assert all("SECRET" not in text for text in frame_texts)
    assert ws_forbidden == "error"
    # Control: WebSockets do go through the proxy (a CONNECT to the allowed address works).
    assert ws_allowed == "message hello"
    assert sites.secret_connections == before
    connects = [d for d in harness.pool.egress.decisions if d.method == "CONNECT"]
    assert any(d.host == "127.0.0.1" and not d.allowed for d in connects)
    assert any(d.host == ALLOWED and d.allowed for d in connects)


def test_https_tunnel_to_a_forbidden_address_is_refused(harness, sites):
    before = sites.secret_connections

    async def body(session: JobBrowser) -> Any:
        try:
            await session.page.goto(f"https://127.0.0.1:{sites.port}/secret")
        except Exception as exc:
            return str(exc)
        return "loaded"

    assert "ERR_TUNNEL_CONNECTION_FAILED" in harness.page_test(body)
    assert sites.secret_connections == before


def test_dns_rebinding_connects_to_the_checked_address(harness, sites):
    # First answer the allowed address, then a forbidden one, for the same name.
    harness.resolver.set("rebind.test", [ALLOWED], ["127.0.0.1"])
    before = sites.secret_connections
    dialled_before = len(harness.connector.dialled)

    async def body(session: JobBrowser) -> Any:
        page = session.page
        first = await page.goto(sites.url("/", "rebind.test"))
        again = await page.evaluate(
            """async () => { const r = await fetch('/secret?again=1');
                             return [r.status, await r.text()]; }"""
        )
        return first.status, await page.inner_text("#h"), again

    status, text, (again_status, again_text) = harness.page_test(body)
    assert (status, text) == (200, "public page")
    assert again_status == 403 and "SECRET" not in again_text
    assert sites.secret_connections == before
    dialled = harness.connector.dialled[dialled_before:]
    assert dialled and all(host == ALLOWED for host, _ in dialled)
    rebind = [d for d in harness.pool.egress.decisions if d.host == "rebind.test"]
    assert [d.allowed for d in rebind][:2] == [True, False]
    assert rebind[0].address == ALLOWED


def test_service_worker_registration_is_blocked(harness, sites):
    sites.public.pages["/sw.js"] = "self.addEventListener('fetch', () => {});"

    async def body(session: JobBrowser) -> Any:
        await session.page.goto(sites.url("/"))
        return await session.page.evaluate(
            """async () => {
                if (!('serviceWorker' in navigator)) return [0, 'unavailable'];
                let outcome;
                try { outcome = String(await navigator.serviceWorker.register('/sw.js')); }
                catch (e) { outcome = 'refused'; }
                await new Promise(r => setTimeout(r, 500));
                return [(await navigator.serviceWorker.getRegistrations()).length, outcome]; }"""
        )

    registrations, _outcome = harness.page_test(body)
    # Playwright's "block" turns register() into a no-op: nothing registered, never fetched.
    assert registrations == 0
    assert "/sw.js" not in sites.public.paths


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "view-source:http://127.0.0.1:1/",
        "chrome://version",
        "data:text/html,<h1>x</h1>",
    ],
)
def test_non_http_navigations_from_a_page_are_refused(harness, sites, url):
    async def body(session: JobBrowser) -> Any:
        page = session.page
        await page.goto(sites.url("/"))
        await page.evaluate("u => { location.href = u; }", url)
        await page.wait_for_timeout(500)
        frame = await page.evaluate(
            """u => new Promise(done => {
                const f = document.createElement('iframe'); f.src = u;
                f.onload = () => { try { done(f.contentDocument.body.innerText); }
                                   catch (e) { done('cross-origin'); } };
                document.body.appendChild(f); setTimeout(() => done('none'), 1500); })""",
            url,
        )
        return page.url, await page.content(), frame

    final_url, content, frame = harness.page_test(body)
    assert final_url == sites.url("/")  # the page never left its origin
    assert "root:" not in content and "root:" not in frame


def test_workflow_goto_refuses_non_http_schemes_before_the_browser(harness):
    guard = EgressGuard(resolver=harness.resolver, policy=POLICY)
    for url in ("file:///etc/passwd", "view-source:http://x/", "chrome://version"):
        assert not guard.check_scheme(url).allowed
        assert not asyncio.run(guard.check(url)).allowed


def step_context(session: JobBrowser, step: Any, guard: EgressGuard) -> RunContext:
    """A job context for running one step directly (these steps make no artifacts)."""
    request = JobRequest(steps=[step])
    plan = RunPlan(
        tenant_id="t",
        job_id="j",
        attempt=1,
        tries=1,
        request=request,
        options=request.options,
        steps=(step,),
        compensate=(),
        labels=(step.describe(),),
        masker=Masker(),
    )
    return RunContext(
        plan=plan,
        session=session,
        guard=guard,
        artifacts=None,  # type: ignore[arg-type]
    )


def test_a_file_request_the_checks_missed_stops_the_job(harness):
    """The backstop: a navigation to file: that got past goto's check (here Playwright's own
    goto, which no step exposes) closes the job's context, and no later step runs."""
    extract = Extract(name="leak", selector="body")

    async def body(session: JobBrowser) -> Any:
        ctx = step_context(session, extract, harness.guard)
        with contextlib.suppress(Exception):
            await session.page.goto("file:///etc/passwd")
        failure: FailJob | None = None
        try:
            await run_steps([extract], ctx)
        except FailJob as refused:
            failure = refused
        if not session.page.is_closed():
            with contextlib.suppress(Exception):
                await session.page.wait_for_event("close", timeout=5_000)
        return failure, ctx.result, session.page.is_closed()

    failure, result, closed = harness.page_test(body)
    assert isinstance(failure, FailJob), result
    assert failure.kind == "egress_refused"
    assert "scheme 'file' is not allowed" in failure.message
    assert result == {}
    assert closed
    assert harness.guard.stopped is not None


# --- the proxy alone: refusals happen before any connect -------------------------------------
@pytest.mark.parametrize(
    "target",
    [
        "169.254.169.254:80",  # EC2/GCP/Azure metadata
        "169.254.170.2:80",  # ECS/Fargate task credentials
        "10.0.0.1:80",
        "172.16.0.1:443",
        "192.168.1.1:80",
        "100.64.0.1:80",
        "[fd00:ec2::254]:80",
        "[fe80::1]:80",
        "0.0.0.0:80",
        "224.0.0.1:80",
        "255.255.255.255:80",
        "[::ffff:169.254.169.254]:80",
        "[64:ff9b::a9fe:a9fe]:80",
        "2852039166:80",  # 169.254.169.254 in decimal
        "0xa9fea9fe:80",
        "0251.0376.0251.0376:80",  # octal
        "127.0.0.1:80",
        "[::1]:80",
        "instance-data:80",
        "metadata.google.internal:80",
    ],
)
def test_proxy_refuses_before_connecting(target):
    resolver = TableResolver()
    connector = LoopbackOnlyConnector()

    async def go() -> tuple[bytes, bytes]:
        proxy = EgressProxy(POLICY, resolver, connect=connector)
        await proxy.start()
        try:
            answers = []
            for request in (
                f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n",
                f"GET http://{target}/latest/meta-data/ HTTP/1.1\r\nHost: {target}\r\n\r\n",
            ):
                reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
                writer.write(request.encode())
                answers.append(await asyncio.wait_for(reader.read(), 5))
                writer.close()
            return answers[0], answers[1]
        finally:
            await proxy.close()

    for answer in asyncio.run(go()):
        assert answer.startswith(b"HTTP/1.1 403"), answer[:100]
        assert REFUSAL_HEADER.encode() in answer
    assert connector.dialled == []
    assert resolver.calls == []  # literals and metadata names never reach DNS


def test_goto_that_is_redirected_to_a_forbidden_address_fails_as_egress_refused(harness, sites):
    """The job's error names the refusal, instead of extracting from the proxy's 403 page."""
    from browser_task.run.steps.navigation import goto
    from pagefleet.workflow import Goto

    target = sites.url("/secret", "127.0.0.1")
    step = Goto(url=sites.url(f"/redirect?to={target}"))

    async def body(session: JobBrowser) -> Any:
        ctx = step_context(session, step, EgressGuard(resolver=harness.resolver, policy=POLICY))
        try:
            await goto(step, ctx)
        except FailJob as failure:
            return failure
        return None

    failure = harness.page_test(body)
    assert isinstance(failure, FailJob)
    assert failure.kind == "egress_refused"
    assert "refused" in failure.message


# --- a job's own upstream proxy ----------------------------------------------------------------
@pytest.mark.parametrize(
    "upstream_host",
    ["169.254.169.254", "10.0.0.1", "127.0.0.1", "::ffff:a9fe:a9fe", "metadata.google.internal"],
)
def test_a_jobs_upstream_proxy_on_a_forbidden_address_is_refused_before_connecting(
    upstream_host,
):
    resolver = TableResolver()
    connector = LoopbackOnlyConnector()

    async def go() -> Refused:
        proxy = EgressProxy(
            POLICY, resolver, connect=connector, upstream=UpstreamProxy(upstream_host, 3128)
        )
        try:
            await proxy.check_upstream()
        except Refused as refused:
            return refused
        raise AssertionError("the upstream was accepted")

    refused = asyncio.run(go())
    assert refused.status == 403 and refused.kind == "policy"
    assert upstream_host in refused.reason
    assert connector.dialled == []


def test_behind_a_jobs_proxy_targets_are_checked_and_tunnelled_by_checked_address(sites):
    resolver = TableResolver()
    resolver.set("shop.example", [ALLOWED])
    resolver.set("rebind.example", ["127.0.0.1"])
    connector = LoopbackOnlyConnector()

    async def go(upstream_url: str, password: str) -> list[bytes]:
        host, port = upstream_url.removeprefix("http://").rsplit(":", 1)
        proxy = EgressProxy(
            POLICY,
            resolver,
            connect=connector,
            upstream=UpstreamProxy(host, int(port), "fleet", password),
        )
        await proxy.start()
        answers = []
        try:
            for target in (f"shop.example:{sites.port}", f"rebind.example:{sites.port}"):
                reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
                writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
                answers.append(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5))
                writer.close()
        finally:
            await proxy.close()
        return answers

    with upstream_proxy("fleet", "pw", host=ALLOWED) as upstream:
        allowed, forbidden = asyncio.run(go(upstream.url, "pw"))
        assert allowed.startswith(b"HTTP/1.1 200")
        assert forbidden.startswith(b"HTTP/1.1 403")
        # The upstream was asked for the checked address only, never for the forbidden one.
        assert upstream.targets() == [f"{ALLOWED}:{sites.port}"]

        wrong, _ = asyncio.run(go(upstream.url, "nope"))
        assert wrong.startswith(b"HTTP/1.1 502")
        assert b"X-Pagefleet-Egress-Kind: upstream_auth" in wrong
    assert all(ipaddress.ip_address(host).is_loopback for host, _ in connector.dialled)


# --- a pool's own proxy and isolation (WorkerSettings.egress_proxy, isolation "task") ---------
def test_an_isolated_proxy_pool_gives_each_job_a_fresh_browser_and_tunnels_through_its_proxy(
    sites,
):
    """A pool whose egress is a proxy sends every checked target through it (by the checked
    address; a forbidden one never reaches it), and a pool isolated per task launches a
    browser for each job and closes the one before."""
    resolver = TableResolver()
    resolver.set("shop.example", [ALLOWED])
    resolver.set("rebind.example", ["127.0.0.1"])
    connector = LoopbackOnlyConnector()

    async def go(port: int) -> tuple[list[tuple[int, int, bool]], int]:
        settings = WorkerSettings(
            jobs_table="t",
            tenants_table="t",
            artifacts_bucket="b",
            queue_urls={},
            concurrency=1,
            isolation="task",
            egress_proxy=PoolProxy(host=ALLOWED, port=port, username="pool", password="pw"),
        )
        pool = BrowserPool(settings, resolver=resolver, policy=POLICY, connect=connector)
        await pool.start()
        seen = []
        try:
            for target in ("shop.example", "rebind.example"):
                session = await pool.new_session(JobOptions())
                generation = session.generation
                try:
                    response = await session.page.goto(f"http://{target}:{sites.port}/")
                    status = response.status if response is not None else 0
                finally:
                    await session.close()
                # The job's browser closes with its job: nothing of it is left for the next.
                for _ in range(100):
                    if not generation.browser.is_connected():
                        break
                    await asyncio.sleep(0.1)
                seen.append((status, generation.number, generation.browser.is_connected()))
            return seen, pool.launches
        finally:
            await pool.close()

    with upstream_proxy("pool", "pw", host=ALLOWED) as upstream:
        seen, launches = asyncio.run(go(int(upstream.url.rsplit(":", 1)[1])))
        targets = upstream.targets()
    assert [status for status, _, _ in seen] == [200, 403]
    assert [number for _, number, _ in seen] == [1, 2] and launches == 2
    assert not any(connected for _, _, connected in seen)
    # Through the pool's proxy, by checked address; the rebound name never reached it.
    assert targets and set(targets) == {f"{ALLOWED}:{sites.port}"}
    assert all(ipaddress.ip_address(host).is_loopback for host, _ in connector.dialled)
