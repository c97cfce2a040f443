"""A job's URL globs and patterns, and its result schema's patterns, searched with a bound.

A tenant writes the glob (``options.block.urls``, a ``route`` step's ``url``, a ``wait_for``
step's ``url``) or the regular expression (an ``assert`` step's ``url_matches``); the page
chooses the URL it meets (``history.pushState``, a request to a long address). Both regular
expression engines a glob would otherwise meet backtrack: Python's ``re`` in Playwright's
client and V8's in its driver, each shared by every slot of the worker (``**a**a**b``
against a 4,000-character URL held the driver for 36 s). So the worker gives Playwright
callables instead of strings: each glob is turned into a regular expression by Playwright's
own translation (the same semantics as a string glob) and searched by the ``regex`` module
with a timeout, which ``re`` does not have (docs/decisions.md, 2026-12-07). The same holds
for ``expect.json_schema``'s ``pattern`` keywords, searched in page data: on a thread, but
``re`` holds the GIL for as long as it searches, so a thread does not spare the loop
(``SchemaSearch``).

A search over its budget ends the job's matching: that glob, and every other of the
attempt, matches nothing from then on (at most one budget of the loop's time an attempt),
and the job fails ``invalid_workflow`` once its step ends (``SearchBudget.raise_overrun``); so
does a glob Playwright cannot read (the API refuses those; one may come from an input).
Until then a blocked or routed request goes to the network as any other, through the
egress checks, which stay the boundary.

``regex`` is imported when a job first needs it: its extension allocates ~10 MB as it loads
(PSS +11 MB on import; 2-3 MB of a busy worker's steady PSS, bench/worker_memory.py), which
a worker that only runs plain jobs never uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from playwright._impl.isomorphic.url_match import resolve_glob_to_regex_pattern
from playwright.async_api import Error as PlaywrightError

from browser_task.errors import FailJob

if TYPE_CHECKING:
    import regex

# How long one search may hold the worker's loop (the module checks its clock while it
# backtracks, so a search is stopped some tens of milliseconds after this).
SEARCH_BUDGET_S = 0.02


class SearchBudget:
    """One attempt's (or one result check's): whether one of its searches ran over its
    budget (or one of its globs could not be read), and which."""

    def __init__(self) -> None:
        self.overrun: str | None = None

    def refuse(self, reason: str) -> None:
        """Fail the job with ``reason`` when its step ends (the first reason stands)."""
        if self.overrun is None:
            self.overrun = reason

    def search(self, compiled: regex.Pattern[str], text: str, what: str) -> bool:
        """Whether ``compiled`` is found in ``text``; False, at once, after an overrun."""
        if self.overrun is not None:
            return False
        try:
            # concurrent: other threads run while it searches (a result's check is on one).
            return compiled.search(text, timeout=SEARCH_BUDGET_S, concurrent=True) is not None
        except TimeoutError:
            self.refuse(
                f"{what} took over {SEARCH_BUDGET_S * 1000:.0f} ms to search (it backtracks "
                "without end on what it searched): write it without repetition that can "
                "match the same text many ways, such as (a+)+ or several ** around one character"
            )
            return False

    def failure(self) -> FailJob | None:
        return None if self.overrun is None else FailJob(self.overrun, kind="invalid_workflow")

    def raise_overrun(self) -> None:
        failure = self.failure()
        if failure is not None:
            raise failure


def pattern(source: str) -> regex.Pattern[str]:
    """A tenant's regular expression in ``re``'s dialect (the one the model validated)."""
    import regex

    return regex.compile(source, regex.V0)


def glob_matcher(glob: str, budget: SearchBudget) -> Callable[[str], bool]:
    """A Playwright URL glob as a callable Playwright accepts where it takes the glob. One
    Playwright would refuse (an input brought a brace; the API checks the rest) matches
    nothing and fails the job when its step ends, never the context it is installed in."""
    import regex

    what = f"the URL glob {glob!r}"
    try:
        compiled = pattern(resolve_glob_to_regex_pattern(None, glob))
    except (PlaywrightError, regex.error) as exc:
        budget.refuse(f"{what} is not a glob Playwright reads: {exc}")
        return lambda url: False
    return lambda url: budget.search(compiled, url, what)


def any_glob_matcher(globs: list[str], budget: SearchBudget) -> Callable[[str], bool]:
    """One callable for several globs (``options.block.urls``): one route, not one each."""
    matchers = [glob_matcher(glob, budget) for glob in globs]
    return lambda url: any(match(url) for match in matchers)


class SchemaSearch:
    """How one check of a result against ``expect.json_schema`` searches its patterns
    (``pagefleet.monitors.expect.PatternSearch``): each compiled once, each search bounded
    by a ``SearchBudget`` of the check; once one ran out of time, every search of the check
    raises at once (the check costs one budget at most)."""

    def __init__(self) -> None:
        self._compiled: dict[str, regex.Pattern[str]] = {}
        self._budget = SearchBudget()

    def __call__(self, source: str, text: str) -> bool:
        compiled = self._compiled.get(source)
        if compiled is None:
            compiled = self._compiled[source] = pattern(source)
        found = self._budget.search(compiled, text, f"pattern {source!r}")
        if self._budget.overrun is not None:
            raise TimeoutError(source)
        return found
