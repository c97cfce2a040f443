"""Webhook URLs pass the browser's egress policy: at submit (here) and again at send time.

A URL is refused when its host is a metadata name, or any address it resolves to is not
public (loopback only where the deployment allows it: local development).
"""

from __future__ import annotations

from pagefleet.errors import InvalidRequest
from pagefleet.targets import egress_policy
from pagefleet.targets.egress_policy import EgressPolicy, EgressRefused, SyncResolver, check_url


def lookup(host: str) -> list[str]:
    # Looked up at call time, so tests replace the system resolver in one place.
    return egress_policy.system_lookup(host)


def check_webhook(
    url: str, *, allow_loopback: bool, field: str, resolve: SyncResolver | None = None
) -> None:
    """Raise ``InvalidRequest`` on ``field`` when pagefleet may not POST to ``url``."""
    try:
        check_url(url, EgressPolicy(allow_loopback=allow_loopback), resolve or lookup)
    except EgressRefused as refused:
        raise InvalidRequest(f"webhook URL not allowed: {refused.reason}", field=field) from None
