"""The browser a job gets: its viewport, identity, timeouts, proxy, trace and isolation
(``options`` of a job request)."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pagefleet.jobs.locales import locale_problem
from pagefleet.specs.stored import stored
from pagefleet.specs.traces import TraceMode
from pagefleet.workflow.globs import checked_glob
from pagefleet.workflow.headers import LINE_BREAKING, RequestHeaders


class Viewport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    width: int = Field(default=1280, ge=200, le=7680)
    height: int = Field(default=800, ge=200, le=4320)


class ProxyOptions(BaseModel):
    """The job's own HTTP proxy. The worker's egress filter still checks every target (and
    this proxy's own address) and asks the proxy to tunnel to the checked address."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    server: str = Field(
        min_length=1, max_length=2000, description="http://host:port (an HTTP CONNECT proxy)"
    )
    username: str | None = Field(default=None, max_length=500)
    password: str | None = Field(default=None, max_length=500, description="use {{secrets.NAME}}")

    @field_validator("server")
    @classmethod
    def _http_proxy(cls, server: str) -> str:
        try:
            parts = urlsplit(server)
            _ = parts.port  # raises on a bad port
        except ValueError as exc:
            raise ValueError(f"not a proxy URL: {exc}") from None
        if parts.scheme.lower() != "http":
            raise ValueError(
                "only http:// proxies are supported (HTTP CONNECT), e.g. http://host:3128"
            )
        if parts.username is not None or parts.password is not None:
            raise ValueError("put the credentials in username and password, not in the URL")
        if not parts.hostname:
            raise ValueError("the proxy URL has no host")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError("the proxy URL is scheme, host and port only")
        if "{{" in server:
            raise ValueError("the proxy server cannot use {{...}} references")
        return f"http://{parts.netloc}"

    @property
    def host(self) -> str:
        return urlsplit(self.server).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.server).port or 80


ResourceType = Literal["image", "font", "media", "stylesheet"]


class BlockOptions(BaseModel):
    """Requests the browser never sends (aborted in the browser, counted in the attempt's
    metrics): by resource type, or by URL glob (Playwright's glob: ``**/ads/**``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    resource_types: list[ResourceType] = Field(default_factory=list, max_length=4)
    urls: list[str] = Field(default_factory=list, max_length=50)

    @field_validator("urls")
    @classmethod
    def _globs(cls, urls: list[str], info: ValidationInfo) -> list[str]:
        for url in urls:
            if not 1 <= len(url) <= 2000:
                raise ValueError("each URL glob is 1 to 2000 characters")
            checked_glob(url, info)
        return urls

    @model_validator(mode="after")
    def _something(self) -> BlockOptions:
        if not self.resource_types and not self.urls:
            raise ValueError("block needs resource_types or urls")
        return self


class JobOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # model_construct: a default instance without building the model's validator at
    # import (cold start); the same value as Viewport().
    viewport: Viewport = Field(
        default=Viewport.model_construct(), description="the page's size in CSS pixels"
    )
    navigation_timeout_ms: int = Field(
        default=30_000, ge=100, le=300_000, description="a goto's (or a step's) page load"
    )
    action_timeout_ms: int = Field(
        default=10_000, ge=100, le=300_000, description="a step's wait for its element"
    )
    job_timeout_s: int = Field(
        default=300, ge=1, le=3600, description="an attempt's whole run, every step included"
    )
    user_agent: str | None = Field(
        default=None,
        max_length=1000,
        description="the browser's User-Agent (unset: Chromium's); no NUL, CR or LF",
    )
    locale: str | None = Field(
        default=None,
        max_length=35,
        pattern=r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$",
        description="a BCP 47 tag (en-GB): navigator.language and Accept-Language",
    )
    timezone_id: str | None = Field(
        default=None, max_length=64, description="an IANA time zone (Europe/Paris)"
    )
    extra_headers: RequestHeaders = Field(
        default_factory=dict,
        max_length=50,
        description=(
            "headers sent with every request (may use {{secrets.NAME}}): names are tokens, "
            "each once in any case; no Host, Connection, Content-Length, Transfer-Encoding, "
            "Keep-Alive, Upgrade, TE, Trailer, Set-Cookie, Cookie2 or Proxy-* (Chromium "
            "refuses them); no NUL, CR or LF in a value"
        ),
    )
    proxy: ProxyOptions | None = Field(
        default=None, description="an upstream proxy, behind the worker's egress checks"
    )
    # When attempts record a Playwright trace (pagefleet.specs.traces); None: the tenant's
    # default (on-first-retry unless an admin set another), resolved when the job is made.
    trace: TraceMode | None = Field(
        default=None,
        description=(
            "which attempts record a Playwright trace.zip, as Playwright Test's trace option; "
            "unset: the tenant's mode, else on-first-retry; true is on, false off"
        ),
    )
    # Record the run's traffic as har.zip (redacted; kept like a trace). "on_failure": kept
    # only when the attempt fails (what an offline replay of a failure needs).
    har: bool | Literal["on_failure"] = Field(
        default=False, description='keep the traffic as har.zip: true, or "on_failure"'
    )
    # Record the run as video.webm (Playwright's video recording; kept like a trace).
    video: bool = Field(default=False, description="record the run as video.webm")
    capture_console: bool = Field(
        default=False,
        description="keep the page's console messages and errors as run events (masked)",
    )
    # "job": a fresh browser context per job. "tenant": the worker may run this job in a
    # warm context left by an earlier successful job of the same tenant, pool and options
    # (cookies, storage and HTTP cache carry over; see README, "Warm contexts").
    isolation: Literal["job", "tenant"] = Field(
        default="job",
        description="job: a fresh context; tenant: may reuse a warm one of the same tenant",
    )
    # What the page's dialogs (alert, confirm, prompt, beforeunload) get when no ``dialog``
    # step expects them: each is a run event either way.
    dialogs: Literal["accept", "dismiss"] = Field(
        default="dismiss",
        description=(
            "how a dialog no dialog step expects is answered: accept (confirm() is true, "
            "prompt() gets prompt_text) or dismiss (confirm() is false, prompt() null)"
        ),
    )
    prompt_text: str | None = Field(
        default=None,
        max_length=10_000,
        description="what an accepted prompt() gets (its default value when omitted)",
    )

    block: BlockOptions | None = Field(
        default=None, description="requests never sent: resource types and URL globs"
    )

    @field_validator("trace", mode="before")
    @classmethod
    def _trace_as_before(cls, value: object) -> object:
        # ``trace: true`` asked for a trace before the modes existed: keep meaning that.
        if isinstance(value, bool):
            return "on" if value else "off"
        return value

    @field_validator("har", mode="before")
    @classmethod
    def _har_value(cls, value: object) -> object:
        # One error naming options.har, not one per member of the union.
        if isinstance(value, bool) or value == "on_failure":
            return value
        raise ValueError('har is true, false or "on_failure"')

    @field_validator("user_agent")
    @classmethod
    def _sendable_user_agent(cls, agent: str | None, info: ValidationInfo) -> str | None:
        if agent is not None and not stored(info) and LINE_BREAKING.search(agent):
            raise ValueError("the User-Agent holds a NUL, CR or LF character; Chromium refuses it")
        return agent

    @field_validator("locale")
    @classmethod
    def _chromium_locale(cls, locale: str | None, info: ValidationInfo) -> str | None:
        if locale is not None and not stored(info):
            problem = locale_problem(locale)
            if problem is not None:
                raise ValueError(f"Chromium refuses the locale {locale!r}: {problem}")
        return locale

    @field_validator("timezone_id")
    @classmethod
    def _known_timezone(cls, tz: str | None) -> str | None:
        if tz is not None:
            try:
                ZoneInfo(tz)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(f"unknown time zone {tz!r}") from exc
        return tz
