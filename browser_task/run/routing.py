"""The job's own request routing: ``options.block`` and ``route`` steps, in the browser.

Nothing is routed unless a job asks: a Playwright route pauses requests for a round trip
to the driver (executor.scheme_guard says what that costs), so the block list is installed
only for a job that has one. Its globs are matched here, by callables with a time bound
(browser_task.run.url_patterns), so a job that has any pauses every request of its page:
the block list's globs share one route, and each ``route`` step adds one.
Playwright tries the newest route first, so a ``route`` step wins over ``options.block``
for the requests it matches, and a later ``route`` step over an earlier one.

The egress guard stays the boundary. Aborting sends nothing anywhere. A fulfilled request
is never sent either, but a page could be made to believe a refused address answered (an
internal host's page, a metadata document), so before fulfilling, the request's URL is
checked with the job's ``EgressGuard`` (the same policy as the egress proxy): a refused
URL is aborted, logged as an egress refusal and counted, never answered.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from playwright.async_api import BrowserContext
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Route as PageRoute

from browser_task.browser.setup import ContextSetup, RoutesFirst, together
from browser_task.egress.guard import EgressGuard
from browser_task.run.url_patterns import SearchBudget, any_glob_matcher, glob_matcher
from pagefleet.jobs.lifecycle import Outcome
from pagefleet.jobs.options import BlockOptions
from pagefleet.jobs.record import RunMetrics
from pagefleet.workflow import Route

if TYPE_CHECKING:
    from browser_task.observe.usage import AttemptMeter

# The network error a blocked or aborted request gets (net::ERR_BLOCKED_BY_CLIENT).
ABORTED = "blockedbyclient"


class RequestRouter:
    """One attempt's routes and what they did (its metrics)."""

    def __init__(
        self, guard: EgressGuard, block: BlockOptions | None, replay_har: bytes | None = None
    ) -> None:
        self._guard = guard
        self.block = block
        # An offline replay's HAR (pagefleet.jobs.replay): every request answered from it.
        self.replay_har = replay_har
        self.blocked = 0  # aborted by options.block
        self.routed = 0  # aborted or answered by a route step
        self.refused = 0  # matched a route step, refused by the egress policy
        self.routes = 0  # route steps applied
        # The bound on its globs' searches (browser_task.run.url_patterns).
        self.budget = SearchBudget()

    @property
    def used(self) -> bool:
        """Whether this context carries routes of this job (a warm context must not)."""
        return self.block is not None or self.replay_har is not None or self.routes > 0

    def metrics(self, requests: int | None) -> RunMetrics:
        return RunMetrics(
            requests=requests,
            blocked=self.blocked,
            routed=self.routed,
            route_refused=self.refused,
        )

    async def install(self, context: BrowserContext) -> None:
        """An offline replay's HAR and ``options.block``, before the page's first request."""
        if self.replay_har is not None:
            await self._replay(context, self.replay_har)
        block = self.block
        if block is None:
            return
        if block.resource_types:
            types = frozenset(block.resource_types)

            async def by_type(route: PageRoute) -> None:
                if route.request.resource_type in types:
                    await self._blocked(route)
                else:
                    await _quietly(route.fallback())

            await context.route("**/*", by_type)
        if block.urls:
            await context.route(any_glob_matcher(block.urls, self.budget), self._blocked)

    async def add(self, context: BrowserContext, step: Route) -> None:
        """A ``route`` step: from now on, requests matching its glob get its answer."""

        async def answer(route: PageRoute) -> None:
            if step.abort:
                self.routed += 1
                await _quietly(route.abort(ABORTED))
                return
            verdict = await self._guard.check(route.request.url)
            if not verdict.allowed:
                self.refused += 1
                await _quietly(route.abort(ABORTED))
                return
            fulfill = step.fulfill
            assert fulfill is not None  # the model: abort or fulfill
            self.routed += 1
            await _quietly(
                route.fulfill(status=fulfill.status, headers=fulfill.headers, body=fulfill.body)
            )

        await context.route(glob_matcher(step.url, self.budget), answer)
        self.routes += 1

    async def _replay(self, context: BrowserContext, har: bytes) -> None:
        """Answer the page from ``har`` only: what it lacks is aborted (``not_found``), and
        what it has for a refused address is refused, as a route step's answer is."""
        directory = tempfile.mkdtemp(prefix="pagefleet-replay-")
        context.on("close", lambda _context: shutil.rmtree(directory, ignore_errors=True))
        path = os.path.join(directory, "replayed.zip")
        with open(path, "wb") as file:
            file.write(har)
        await context.route_from_har(path, not_found="abort")

        async def guarded(route: PageRoute) -> None:
            # Registered after the HAR's route, so it runs first (newest first).
            if (await self._guard.check(route.request.url)).allowed:
                await _quietly(route.fallback())
            else:
                self.refused += 1
                await _quietly(route.abort(ABORTED))

        await context.route("**/*", guarded)

    async def _blocked(self, route: PageRoute) -> None:
        self.blocked += 1
        await _quietly(route.abort(ABORTED))


def with_routes(setup: ContextSetup, router: RequestRouter) -> ContextSetup:
    """``setup`` plus the job's routes, in place before the page opens (nothing to add
    without any)."""
    if router.block is None and router.replay_har is None:
        return setup
    return together(setup, RoutesFirst(router.install))


async def _quietly(call: Any) -> None:
    # The page may be closing (the job ended, a navigation replaced it): nothing to answer.
    with contextlib.suppress(PlaywrightError):
        await call


def with_metrics(
    outcome: Outcome | None, router: RequestRouter | None, meter: AttemptMeter | None
) -> Outcome | None:
    """The outcome with what the job's routes did (kept only for a job that routes)."""
    if outcome is None or router is None or not router.used:
        return outcome
    requests = meter.page_requests if meter is not None else None
    return replace(outcome, metrics=router.metrics(requests))
