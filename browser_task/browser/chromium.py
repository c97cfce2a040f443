"""How the worker's Chromium is launched: the executable, the sandbox, the switches.

The switches do four things (figures and the reasoning: docs/performance.md, "Memory"):

- **Nothing leaves the machine on Chromium's own initiative.** Component updates, field
  trials, safe-browsing lists, optimization hints, translate, sign-in, metrics and crash
  uploads, network time, domain reliability: all off. Every byte still goes through the
  egress proxy, so this is about not wasting time on refused requests and not sending
  anything we did not mean to; ``tests/worker/test_no_phone_home.py`` holds it.
- **Fewer processes, smaller caches, nothing shared between jobs.** The network service
  runs inside the browser process (one utility process less), no spare renderer is kept
  warm, site isolation inside a page is off (a job's own cross-site iframes share its
  renderer; renderers are never shared between BrowserContexts, so never between jobs),
  the per-context HTTP cache is capped, and V8's young generation is kept small.
- **No browser UI is built that headless never shows** (the omnibox popup's WebUI, a
  renderer and ~320 ms of CPU per page: ``UNSHOWN_UI_FEATURES``).
- **The Playwright driver (node) keeps a small young generation** (``driver_env``).

Chromium keeps only the LAST ``--disable-features`` / ``--enable-features`` switch, and
Playwright passes its own first, so ours must repeat Playwright's: ``PLAYWRIGHT_*_FEATURES``
below, checked against the driver's real command line by ``tests/worker/test_chromium.py``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from playwright.async_api import Browser, Playwright

from pagefleet.specs.settings import WorkerSettings

# Debian's /usr/bin/chromium is a shell wrapper that exports Google API keys (turning on
# sign-in and other Google services) and adds switches of its own (remote extensions, GPU
# rasterization); the binary behind it is launched directly when it is there.
SYSTEM_CHROMIUM_BINARY = "/usr/lib/chromium/chromium"
SYSTEM_CHROMIUM = "/usr/bin/chromium"

# What Playwright (1.65) puts in its own --disable-features / --enable-features.
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync",
    "DestroyProfileOnBrowserClose",
    "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable",
    "LensOverlay",
    "MediaRouter",
    "PaintHolding",
    "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect",
    "TcpPortRandomizationWin",
    "OptimizationHints",
    "NetworkTimeServiceQuerying",
    "AimEnabled",
    "PreconnectToSearch",
    "msForceBrowserSignIn",
    "msEdgeUpdateLaunchServicesPreferredVersion",
)
PLAYWRIGHT_ENABLED_FEATURES = ("CDPScreenshotNewSurface", "SkipListAccountsWithoutGaiaCookies")

# Features a headless job never needs that would call Google (or anyone) on their own.
NO_PHONE_HOME_FEATURES = (
    "Translate",
    "OptimizationGuideModelDownloading",
    "OptimizationHintsFetching",
    "OptimizationTargetPrediction",
    "AutofillServerCommunication",
    "CertificateTransparencyComponentUpdater",
    "DialMediaRouteProvider",
    "InterestFeedContentSuggestions",
    "SafeBrowsingEnhancedProtection",
    "ComponentUpdaterSignedRequests",
    "PrivacySandboxSettings4",
    "BrowsingTopics",
)
# Memory: no renderer kept warm for the next navigation; a page's cross-site iframes in
# its own renderer (a process per site per job would cost ~20 MB each on ad-heavy pages).
MEMORY_DISABLED_FEATURES = (
    "SpareRendererForSitePerProcess",
    "IsolateOrigins",
    "site-per-process",
)
# Memory: the network service inside the browser process (one utility process less).
MEMORY_ENABLED_FEATURES = ("NetworkServiceInProcess2",)
# The omnibox's popup, which headless never shows: Chromium (156 here) builds it as a
# WebUI page (chrome://omnibox-popup.top-chrome/: ~400 modules, ~90 custom elements) in a
# renderer of its own (``--top-chrome-webui``) for every new page, so for every job: ~320 ms
# of renderer CPU and ~60 ms of the browser's in the page's first second, and a process
# more per open context (docs/performance.md, "The omnibox popup").
UNSHOWN_UI_FEATURES = ("WebUIOmniboxPopup", "WebUIOmniboxFullPopup", "WebUIOmniboxAimPopup")

DISABLED_FEATURES = (
    *PLAYWRIGHT_DISABLED_FEATURES,
    *NO_PHONE_HOME_FEATURES,
    *MEMORY_DISABLED_FEATURES,
    *UNSHOWN_UI_FEATURES,
)
ENABLED_FEATURES = (*PLAYWRIGHT_ENABLED_FEATURES, *MEMORY_ENABLED_FEATURES)

# Two services ignore every switch above: the identity manager lists the Google accounts of
# the browser's own profile (accounts.google.com/ListAccounts) as soon as its network is up,
# and the component updater checks update.googleapis.com once at start. Their base URLs are
# pointed at a port Chromium itself refuses to connect to (1 is on its unsafe-port list),
# so those requests fail inside the browser and never reach the egress proxy.
NOWHERE = "http://127.0.0.1:1/"

# Per-context HTTP cache cap (in memory for Playwright's contexts); a job rarely reuses more.
HTTP_CACHE_BYTES = 16 * 1024 * 1024

BASE_ARGS = (
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-quic",
    "--password-store=basic",
    # Google services and other background traffic.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-field-trial-config",
    "--disable-client-side-phishing-detection",
    "--safebrowsing-disable-auto-update",
    "--disable-domain-reliability",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--no-pings",
    "--metrics-recording-only",
    "--no-service-autorun",
    f"--gaia-url={NOWHERE}",
    f"--component-updater=url-source={NOWHERE}",
    f"--disable-features={','.join(DISABLED_FEATURES)}",
    f"--enable-features={','.join(ENABLED_FEATURES)}",
    # Memory (see the module docstring).
    "--disable-site-isolation-trials",
    f"--disk-cache-size={HTTP_CACHE_BYTES}",
    f"--media-cache-size={HTTP_CACHE_BYTES}",
    "--js-flags=--max-semi-space-size=1",
)

# Node's default young generation (16 MB semi-spaces) grows the driver by ~25 MB for no
# measurable gain in a driver that mostly relays small messages.
DRIVER_NODE_OPTIONS = "--max-semi-space-size=1"


def chromium_args(settings: WorkerSettings, proxy_url: str | None = None) -> list[str]:
    args = list(BASE_ARGS)
    # Renderers are never shared between contexts, so this cannot put two jobs in one
    # process; it bounds how many a single job's page can spawn.
    args.append(f"--renderer-process-limit={max(4, 2 * settings.concurrency)}")
    if not sandbox_enabled(settings):
        args.append("--no-sandbox")
    if proxy_url is not None:
        args += proxy_args(proxy_url)
    return args


def proxy_args(proxy_url: str) -> list[str]:
    """Everything through the egress proxy, loopback included; nothing around it."""
    return [
        f"--proxy-server={proxy_url}",
        # Chromium bypasses proxies for localhost/127.0.0.1/[::1] by default; "<-loopback>"
        # removes that implicit rule so loopback requests are filtered like any other.
        "--proxy-bypass-list=<-loopback>",
        # WebRTC would otherwise send UDP (STUN/TURN, host candidates) around the proxy.
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--dns-prefetch-disable",
    ]


def driver_env() -> dict[str, str]:
    """Environment for the Playwright driver process (node); see ``DRIVER_NODE_OPTIONS``."""
    current = os.environ.get("NODE_OPTIONS", "")
    if "--max-semi-space-size" in current:
        return {}
    return {"NODE_OPTIONS": f"{current} {DRIVER_NODE_OPTIONS}".strip()}


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set variables for a child process started inside the block (Playwright's driver
    takes this process's environment), then put them back."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def sandbox_enabled(settings: WorkerSettings) -> bool:
    """Explicit setting wins; by default the sandbox is on unless we run as root.

    Chromium refuses to start sandboxed as root, and Fargate grants no user namespaces, so
    containers usually run it unsandboxed and rely on the task's isolation instead.
    """
    if settings.chromium_sandbox is not None:
        return settings.chromium_sandbox
    geteuid = getattr(os, "geteuid", None)
    return not (geteuid is not None and geteuid() == 0)


def chromium_executable(settings: WorkerSettings, playwright: Playwright) -> str:
    if settings.chromium_path:
        return settings.chromium_path
    try:
        managed = playwright.chromium.executable_path
    except Exception:  # no managed browser registered for this platform
        managed = ""
    if managed and Path(managed).exists():
        return managed
    if Path(SYSTEM_CHROMIUM_BINARY).exists():
        return SYSTEM_CHROMIUM_BINARY
    return SYSTEM_CHROMIUM


# A command-line switch Chromium ignores; it names the browser process of one launch so we
# can find (and, if need be, kill) exactly that process tree.
MARKER_SWITCH = "--pagefleet-browser"


async def launch(
    playwright: Playwright, settings: WorkerSettings, proxy_url: str
) -> tuple[Browser, str]:
    """Chromium launched as a worker launches it, and the marker switch on its command line."""
    marker = f"{MARKER_SWITCH}={os.getpid()}-{secrets.token_hex(6)}"
    browser = await playwright.chromium.launch(
        executable_path=chromium_executable(settings, playwright),
        headless=settings.headless,
        args=[*chromium_args(settings, proxy_url), marker],
        chromium_sandbox=sandbox_enabled(settings),
    )
    return browser, marker
