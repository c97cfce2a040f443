"""A route step never answers for an address the egress policy refuses, and options.block
stops what it names: the router's decisions on fake requests (no browser, no connection,
a resolver that only answers from a table)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from browser_task.browser.contexts import open_context
from browser_task.browser.generation import BrowserGeneration
from browser_task.browser.setup import ContextSetup, RoutesFirst
from browser_task.browser.tracing import TracePlan, TraceRecorder
from browser_task.egress.guard import EgressGuard
from browser_task.run.early import with_trace
from browser_task.run.executor import scheme_guard
from browser_task.run.routing import ABORTED, RequestRouter, with_routes
from pagefleet.jobs.options import BlockOptions, JobOptions
from pagefleet.workflow import Route

ADDRESSES = {"shop.test": ["93.184.216.34"], "intranet.test": ["10.0.0.7"]}


async def table(host: str) -> list[str]:
    try:
        return ADDRESSES[host]
    except KeyError:
        raise OSError(f"no address for {host}") from None


@dataclass
class FakeRequest:
    url: str
    resource_type: str = "fetch"


@dataclass
class FakeRoute:
    request: FakeRequest
    answered: list[tuple[str, Any]] = field(default_factory=list)

    async def abort(self, code: str) -> None:
        self.answered.append(("abort", code))

    async def fulfill(self, **kwargs: Any) -> None:
        self.answered.append(("fulfill", kwargs))

    async def fallback(self) -> None:
        self.answered.append(("fallback", None))


class FakeContext:
    """Playwright's routing order: the newest route whose glob matches answers first."""

    def __init__(self) -> None:
        self.routes: list[tuple[str | Callable[[str], bool], Any]] = []

    async def route(self, glob: str | Callable[[str], bool], handler: Any) -> None:
        self.routes.insert(0, (glob, handler))

    async def send(self, url: str, resource_type: str = "fetch") -> FakeRoute:
        route = FakeRoute(FakeRequest(url, resource_type))
        for glob, handler in self.routes:
            if _matches(glob, url):
                before = len(route.answered)
                await handler(route)
                if route.answered[before:] != [("fallback", None)]:
                    return route
        route.answered.append(("network", None))
        return route


def _matches(glob: str | Callable[[str], bool], url: str) -> bool:
    if callable(glob):  # a job's glob, matched by the worker (browser_task.run.url_patterns)
        return glob(url)
    if glob == "**/*":
        return True
    return url.startswith(glob.rstrip("*"))


def _router(block: BlockOptions | None = None) -> tuple[RequestRouter, list[str]]:
    refusals: list[str] = []
    guard = EgressGuard(
        resolver=table, on_refusal=lambda host, port, kind, reason: refusals.append(host)
    )
    return RequestRouter(guard, block), refusals


def _fulfil(url: str) -> Route:
    return Route(url=url, fulfill={"status": 200, "body": "mocked"})  # type: ignore[arg-type]


def test_a_route_answers_a_public_host_but_never_a_refused_one() -> None:
    async def run() -> None:
        router, refusals = _router()
        context = FakeContext()
        for glob in ("http://shop.test/", "http://intranet.test/", "http://169.254.169.254/"):
            await router.add(context, _fulfil(glob + "**"))  # type: ignore[arg-type]
        shop = await context.send("http://shop.test/api/price")
        inside = await context.send("http://intranet.test/admin")
        metadata = await context.send("http://169.254.169.254/latest/meta-data/")
        assert shop.answered[0][0] == "fulfill"
        assert inside.answered == [("abort", ABORTED)]
        assert metadata.answered == [("abort", ABORTED)]
        assert refusals == ["intranet.test", "169.254.169.254"]
        metrics = router.metrics(3)
        assert (metrics.routed, metrics.route_refused, metrics.blocked) == (1, 2, 0)

    asyncio.run(run())


def test_a_host_that_does_not_resolve_is_not_answered_either() -> None:
    async def run() -> None:
        router, _ = _router()
        context = FakeContext()
        await router.add(context, _fulfil("http://nowhere.test/**"))  # type: ignore[arg-type]
        route = await context.send("http://nowhere.test/x")
        assert route.answered == [("abort", ABORTED)] and router.refused == 1

    asyncio.run(run())


def test_block_stops_the_types_and_globs_it_names_and_lets_the_rest_through() -> None:
    async def run() -> None:
        block = BlockOptions(resource_types=["image", "font"], urls=["http://shop.test/ads/**"])
        router, _ = _router(block)
        context = FakeContext()
        await router.install(context)  # type: ignore[arg-type]
        image = await context.send("http://shop.test/a.png", "image")
        font = await context.send("http://shop.test/a.woff2", "font")
        ad = await context.send("http://shop.test/ads/track.js", "script")
        page = await context.send("http://shop.test/", "document")
        assert [r.answered[-1][0] for r in (image, font, ad)] == ["abort"] * 3
        assert page.answered[-1] == ("network", None)
        assert router.blocked == 3 and router.used

    asyncio.run(run())


def test_a_route_step_wins_over_the_block_list_for_what_it_matches() -> None:
    async def run() -> None:
        router, _ = _router(BlockOptions(resource_types=["image"]))
        context = FakeContext()
        await router.install(context)  # type: ignore[arg-type]
        await router.add(context, _fulfil("http://shop.test/logo*"))  # type: ignore[arg-type]
        logo = await context.send("http://shop.test/logo.png", "image")
        assert logo.answered[0][0] == "fulfill" and router.blocked == 0

    asyncio.run(run())


def test_a_job_without_routes_keeps_no_metrics() -> None:
    router, _ = _router()
    assert not router.used


class OpeningContext:
    """A context as the pool opens one: it notes when its page opens and when a route is
    set, and its page takes a while to open (as under load), so what runs beside opening
    the page gets there first."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def set_default_timeout(self, timeout: float) -> None: ...

    def set_default_navigation_timeout(self, timeout: float) -> None: ...

    def on(self, event: str, handler: Any) -> None: ...

    async def route(self, glob: str | Callable[[str], bool], handler: Any) -> None:
        await asyncio.sleep(0)
        self.log.append("route")

    async def new_page(self) -> str:
        self.log.append("page opening")
        await asyncio.sleep(0)
        self.log.append("page open")
        return "page"


def _open(setup: ContextSetup) -> list[str]:
    log: list[str] = []

    class Browser:
        async def new_context(self, **_options: Any) -> OpeningContext:
            return OpeningContext(log)

    generation = BrowserGeneration(browser=cast(Any, Browser()), number=1)
    asyncio.run(open_context(generation, JobOptions(), setup=setup))
    return log


def test_a_jobs_routes_are_in_place_before_its_page_opens() -> None:
    # Playwright gives a context's routes to the pages it has when they are set: a page
    # opening beside them can miss them (an offline replay then asked the live site).
    router, _ = _router(BlockOptions(urls=["**/ads/*"]))
    setup = with_routes(scheme_guard(router._guard), router)
    log = _open(setup)
    assert log.index("route") < log.index("page opening"), log
    # Starting a trace beside it keeps it first.
    trace = TraceRecorder(None, TracePlan("on", True, True))
    assert isinstance(with_trace(setup, trace), RoutesFirst)
    # A job without routes opens its page beside its setup (a round trip saved).
    plain = with_routes(scheme_guard(router._guard), _router()[0])
    assert not isinstance(plain, RoutesFirst) and "page open" in _open(plain)
