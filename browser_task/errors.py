"""Worker errors, named by the action they call for, and what each failure calls for.

A step handler raises ``FailJob`` (permanent: the workflow or the page is wrong, running it
again would fail the same way), ``RetryJob`` (transient: the network, the target or the
browser let us down) or ``RotateBrowser`` (the browser itself died: retry on a fresh one).
What others tell us is classified here, in one place, into those three: Playwright's
exceptions, Chromium's network errors, the target's HTTP answer, and the egress filter's
refusals (of a navigation, of a redirect, of the job's own proxy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from browser_task.egress.guard import UNRESOLVED_PREFIX
from browser_task.egress.http import POLICY, UNREACHABLE, UNRESOLVED, UPSTREAM_AUTH, Refused
from pagefleet.jobs.record import JobError
from pagefleet.targets.breakers import origin_of
from pagefleet.workflow import Goto, Step

if TYPE_CHECKING:
    from browser_task.egress.proxy import Decision


class JobFailure(Exception):
    """An attempt ended in failure; ``retryable`` says what the worker should do about it."""

    retryable = False
    default_kind = "step_failed"

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        timeout: str | None = None,
        step_index: int | None = None,
        step: str | None = None,
        origin: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind or self.default_kind
        self.timeout = timeout
        self.step_index = step_index
        self.step = step
        # The site a navigation failure is about: the circuit breakers charge it.
        self.origin = origin

    def at_step(self, index: int, description: str) -> JobFailure:
        """Attach the failing step, unless a more precise one is already attached."""
        if self.step_index is None:
            self.step_index = index
            self.step = description
        return self

    def to_job_error(self) -> JobError:
        return JobError(
            kind=self.kind,
            message=self.message,
            retryable=self.retryable,
            step_index=self.step_index,
            step=self.step,
            timeout=self.timeout,
        )


class FailJob(JobFailure):
    """Permanent: end the job ``failed`` now (bad workflow, assertion, element never appeared)."""


class RetryJob(JobFailure):
    """Transient: schedule another attempt while ``max_attempts`` allows (network, 5xx, 429)."""

    retryable = True


class RotateBrowser(RetryJob):
    """The browser crashed or disconnected: retry the job on a freshly launched browser."""

    default_kind = "browser_crashed"


# What Chromium answers when a context's options are the job's own mistake (measured with
# 156: a locale, time zone, header or User-Agent it will not take). The API refuses such
# options when a job is made; a record written before a rule may still carry one, and no
# fresh browser would take it: the job fails at once instead of retrying on new browsers.
_OPTIONS_REFUSED = (
    "Invalid locale name",
    "Invalid timezone ID",
    "Invalid header name",
    "Invalid header value",
    "Invalid characters found in userAgent",
)


def opening_failure(message: str) -> JobFailure:
    """Why a context would not open: the job's options when Chromium refused them
    (``invalid_workflow``), else the browser (retried on a fresh one)."""
    headline = first_line(message)
    if any(refusal in headline for refusal in _OPTIONS_REFUSED):
        return FailJob(
            f"the browser refused the job's options: {headline}", kind="invalid_workflow"
        )
    return RotateBrowser(f"could not open a browser context: {headline}")


def first_line(text: str, limit: int = 300) -> str:
    """Playwright messages carry a call log that may quote page contents: keep the headline."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


# Chromium net errors that mean "the network or the target failed", worth another attempt.
_RETRYABLE_NET_ERRORS = (
    "net::ERR_CONNECTION_REFUSED",
    "net::ERR_CONNECTION_RESET",
    "net::ERR_CONNECTION_CLOSED",
    "net::ERR_CONNECTION_TIMED_OUT",
    "net::ERR_CONNECTION_ABORTED",
    "net::ERR_TIMED_OUT",
    "net::ERR_NAME_NOT_RESOLVED",
    "net::ERR_NAME_RESOLUTION_FAILED",
    "net::ERR_INTERNET_DISCONNECTED",
    "net::ERR_NETWORK_CHANGED",
    "net::ERR_EMPTY_RESPONSE",
    "net::ERR_ADDRESS_UNREACHABLE",
    "net::ERR_SSL_PROTOCOL_ERROR",
    "net::ERR_HTTP2_PROTOCOL_ERROR",
    "net::ERR_PROXY_CONNECTION_FAILED",
)

_CLOSED_MARKERS = (
    "Target page, context or browser has been closed",
    "Target closed",
    "Browser has been closed",
    "Browser closed",
    "has been closed",
    "Page crashed",
)


def is_closed_error(message: str) -> bool:
    return any(marker in message for marker in _CLOSED_MARKERS)


# The name does not resolve: the job's own mistake (or DNS), never counted against the site.
_UNRESOLVED_NET_ERRORS = ("net::ERR_NAME_NOT_RESOLVED", "net::ERR_NAME_RESOLUTION_FAILED")


def classify_navigation_error(message: str, url: str) -> JobFailure:
    headline = first_line(message)
    what = f"navigation to {url} failed: {headline}"
    origin = origin_of(url)
    if any(code in message for code in _UNRESOLVED_NET_ERRORS):
        return RetryJob(what, kind="host_unresolved", origin=origin)
    if any(code in message for code in _RETRYABLE_NET_ERRORS):
        return RetryJob(what, kind="navigation_failed", origin=origin)
    return FailJob(what, kind="navigation_failed", origin=origin)


# --- the egress filter and the target ----------------------------------------------------------
def refused_navigation(url: str, reason: str) -> JobFailure:
    """The egress guard refused a navigation before the browser made it: a name that did
    not resolve may resolve next time; an address the policy refuses never will."""
    if reason.startswith(UNRESOLVED_PREFIX):
        return RetryJob(
            f"navigation to {url} failed: {reason}",
            kind="navigation_failed",
            origin=origin_of(url),
        )
    return FailJob(f"navigation to {url} refused: {reason}", kind="egress_refused")


def scheme_refused(reason: str) -> FailJob:
    """The page asked for a scheme other than http(s): the scheme watch stopped the job."""
    return FailJob(
        f"the page requested a forbidden URL and the job was stopped: {reason}",
        kind="egress_refused",
    )


def target_unavailable(url: str, status: int, answered_url: str | None = None) -> RetryJob | None:
    """The target answered a navigation with 5xx or 429: it may well answer next time.
    ``answered_url`` is where the navigation ended, after redirects: the origin charged."""
    if status >= 500 or status == 429:
        return RetryJob(
            f"{url} answered HTTP {status}",
            kind="target_unavailable",
            origin=origin_of(answered_url or url),
        )
    return None


def egress_failure(url: str, ended_at: str, reason: str, kind: str | None) -> JobFailure:
    """What the egress proxy's refusal of a navigation means for the job."""
    where = url if ended_at in ("", url) else f"{url} (redirected to {ended_at})"
    if kind == UNREACHABLE:
        return RetryJob(
            f"navigation to {where} failed: {reason}",
            kind="navigation_failed",
            origin=_failed_origin(url, ended_at),
        )
    if kind == UNRESOLVED:  # not the site's failure: the circuit breakers do not count it
        return RetryJob(f"navigation to {where} failed: {reason}", kind="host_unresolved")
    if kind == UPSTREAM_AUTH:
        # A pool's proxy is the operator's to fix (its secret), a job's own its submitter's.
        fix = (
            "the pool's proxy secret needs fixing by an operator"
            if "the pool's proxy" in reason
            else "check options.proxy username and password"
        )
        return FailJob(f"navigation to {where} failed: {reason}; {fix}", kind="proxy_auth_failed")
    if kind not in (None, POLICY):
        # The job's own upstream proxy said no (or failed): it may well answer next time.
        return RetryJob(f"navigation to {where} failed: {reason}", kind="proxy_failed")
    return FailJob(
        f"navigation to {where} was refused by the egress filter: {reason}",
        kind="egress_refused",
    )


def _failed_origin(url: str, ended_at: str) -> str | None:
    """The origin that could not be reached: where the navigation ended (a URL, or the
    ``host:port`` of a refused tunnel), else the URL asked for."""
    if ended_at in ("", url):
        return origin_of(url)
    if "://" in ended_at:
        return origin_of(ended_at)
    return origin_of(f"{urlsplit(url).scheme}://{ended_at}/")


def proxy_refused(refused: Refused) -> JobFailure:
    """The job's proxy could not be used at all (checked before any browser work)."""
    if refused.kind in (UNREACHABLE, UNRESOLVED):
        return RetryJob(refused.reason, kind="proxy_failed")
    return FailJob(
        f"options.proxy is not allowed: {refused.reason}; use a proxy on a public address",
        kind="egress_refused",
    )


# --- Playwright --------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunState:
    """What the run knew when a step's Playwright call raised."""

    timeout_ms: int  # the step's timeout
    timeout: str  # its name: "navigation" (the page loading) or "action"
    stopped: str | None = None  # why the scheme watch stopped the job, if it did
    crashed: bool = False  # the browser crashed
    closed: bool = False  # the context was closed on purpose (a cancel, the watchdog)
    refusals: Sequence[str] = ()  # the egress guard's refusals so far
    tunnel_refusals: Callable[[], Sequence[Decision]] | None = None  # the egress proxy's


def classify_playwright_error(exc: PlaywrightError, step: Step, run: RunState) -> JobFailure:
    if run.stopped is not None:
        return scheme_refused(run.stopped)
    message = str(exc.message if hasattr(exc, "message") else exc)
    if run.crashed or (is_closed_error(message) and not run.closed):
        return RotateBrowser("the browser crashed while running the step")
    selector: str | None = getattr(step, "selector", None)
    if isinstance(exc, PlaywrightTimeoutError):
        return _timeout_failure(step, run, selector)
    if isinstance(step, Goto):
        return _navigation_failure(message, step, run)
    target = f" on selector {selector!r}" if selector is not None else ""
    return FailJob(f"{step.action} failed{target}: {first_line(message)}", kind="step_failed")


def _timeout_failure(step: Step, run: RunState, selector: str | None) -> JobFailure:
    what = f"{step.action} timed out after {run.timeout_ms} ms"
    if selector is not None:
        what += f" waiting for selector {selector!r}"
        frame: str | list[str] | None = getattr(step, "frame", None)
        if frame is not None:
            what += f" in frame {frame!r}"
    elif isinstance(step, Goto):
        what += f" loading {step.url}"
    if isinstance(step, Goto):
        # A slow target may well answer next time.
        return RetryJob(what, kind="step_failed", timeout="navigation")
    return FailJob(what, kind="step_failed", timeout=run.timeout)


def _navigation_failure(message: str, step: Goto, run: RunState) -> JobFailure:
    if "ERR_BLOCKED_BY_CLIENT" in message and run.refusals:
        return refused_navigation(step.url, run.refusals[-1])
    if "ERR_TUNNEL_CONNECTION_FAILED" in message and run.tunnel_refusals is not None:
        # https: the egress proxy refused (or could not open) the tunnel, for the target,
        # a redirect's target, or through the job's proxy.
        refused = run.tunnel_refusals()
        if refused:
            last = refused[-1]
            return egress_failure(
                step.url, f"{last.host}:{last.port}", last.reason or "refused", last.kind
            )
    return classify_navigation_error(message, step.url)
