"""Worker errors, named by the action they call for, and the retry policy.

A step handler raises ``FailJob`` (permanent: the workflow or the page is wrong, running it
again would fail the same way), ``RetryJob`` (transient: the network, the target or the
browser let us down) or ``RotateBrowser`` (the browser itself died: retry on a fresh one).
Playwright's own exceptions are classified here, in one place, into those three.
"""

from __future__ import annotations

from pagefleet.jobs.models import JobError


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
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind or self.default_kind
        self.timeout = timeout
        self.step_index = step_index
        self.step = step

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
    if any(code in message for code in _UNRESOLVED_NET_ERRORS):
        return RetryJob(f"navigation to {url} failed: {headline}", kind="host_unresolved")
    if any(code in message for code in _RETRYABLE_NET_ERRORS):
        return RetryJob(f"navigation to {url} failed: {headline}", kind="navigation_failed")
    return FailJob(f"navigation to {url} failed: {headline}", kind="navigation_failed")
