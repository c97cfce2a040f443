"""How the worker's Chromium is launched: the executable, the sandbox, the switches."""

from __future__ import annotations

import os
from pathlib import Path

from playwright.async_api import Playwright

from pagefleet.settings import WorkerSettings

SYSTEM_CHROMIUM = "/usr/bin/chromium"

# Chromium phones home (updates, field trials, sync) unless told not to; in a locked-down
# network those attempts are refused and waste time, and they are egress we do not want.
BASE_ARGS = (
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-quic",
    "--metrics-recording-only",
    "--password-store=basic",
)


def chromium_args(settings: WorkerSettings, proxy_url: str | None = None) -> list[str]:
    args = list(BASE_ARGS)
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
    return SYSTEM_CHROMIUM
