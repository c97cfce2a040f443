"""The web console as a site, defined once: where it lives, its config and its headers.

CloudFront (infra/constructs/console.py) and the local gateway (devstack/console_app.py)
serve the same files from ``console/`` under the same path, with the same security headers
and a ``config.json`` of the same shape, so what the browser tests check locally is what a
deployed console does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

CONSOLE_DIR = "console"  # in the repository, and the key prefix in the console bucket
CONSOLE_PATH = "/console/"  # where the console is served, next to the API's /v1/
CONFIG_FILE = "config.json"
# What a job's console link asks of the job page (console/views/job.js): watch its live view,
# and take the page over at once while the job waits for a person.
LIVE_TAKEOVER_QUERY = "live=1&takeover=1"


def job_live_link(console_url: str, job_id: str) -> str:
    """The console's page of ``job_id`` opened on its live view with takeover.

    ``console_url``: the console's base (``https://<CloudFront or custom domain>/console/``
    on AWS, ``http://127.0.0.1:<api port>/console/`` on the local stack). The console routes
    on the URL's fragment, so the link works signed in or not (signing in goes on to it)."""
    return f"{console_url.rstrip('/')}/#/jobs/{job_id}?{LIVE_TAKEOVER_QUERY}"


@dataclass(frozen=True)
class SiteConfig:
    """What the console reads at start (``/console/config.json``)."""

    api_base: str  # the API's base path on the console's own origin: "/v1"
    websocket_url: str | None  # the live WebSocket API (wss://.../v1), None without it
    stage: str

    def as_json(self) -> dict[str, Any]:
        return {"api_base": self.api_base, "websocket_url": self.websocket_url, "stage": self.stage}


def content_security_policy(
    *, image_origins: Iterable[str] = (), connect_origins: Iterable[str] = ()
) -> str:
    """A strict policy: scripts and styles only from the console's origin (no inline code),
    images also from the artifact store's presigned URLs, connections to the API (same
    origin) and the live WebSocket API; no frames, no plugins, no base or form tricks."""
    images = " ".join(["'self'", "data:", *image_origins])
    connects = " ".join(["'self'", *connect_origins])
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            f"img-src {images}",
            f"connect-src {connects}",
            "font-src 'self'",
            "manifest-src 'self'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
        ]
    )


# Besides the policy; HSTS is CloudFront's alone (the local console is plain HTTP).
SECURITY_HEADERS: dict[str, str] = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
}
