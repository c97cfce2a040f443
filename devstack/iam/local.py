"""The local stack's IAM: which credentials each part runs with, and the report.

``LocalIam`` is made from the kept synth (``devstack.iam.synth``): the embedded AWS loads
the same file (``PAGEFLEET_IAM_BOOK``) and checks every call there; this side gives each
process its principal's access key (``env``), makes the clients the event sources use as
the functions they feed (on AWS an event source mapping reads with the function's role),
checks the WebSocket ``@connections`` calls (``execute-api:ManageConnections``), and
gathers the report. ``LocalIam.off()`` runs everything as the operator, unchecked.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from devstack.constants import LOCAL_ACCOUNT, LOCAL_REGION
from devstack.iam.book import Book, access_key
from devstack.iam.calls import Account
from devstack.iam.guard import REPORT_PATH, Checker, merge_reports

BOOK_ENV = "PAGEFLEET_IAM_BOOK"
PREFIX_ENV = "PAGEFLEET_IAM_PREFIX"
# The local stack checks IAM unless this is "0" (or the stack is made with iam=False).
SWITCH_ENV = "PAGEFLEET_LOCAL_IAM"
# moto verifies no signature: the key id names the principal, this is no credential.
SECRET = "local-secret"  # noqa: S105

AwsClients = Callable[[str], Any]


def enabled_by_default() -> bool:
    return os.environ.get(SWITCH_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class LocalIam:
    def __init__(self, book_path: Path | None, *, prefix: str = "") -> None:
        self.book_path = book_path
        self.prefix = prefix
        self.account = Account(LOCAL_REGION, LOCAL_ACCOUNT, prefix)
        self.checker = Checker(Book.load(book_path, self.account)) if book_path else None
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def off(cls) -> LocalIam:
        return cls(None)

    @classmethod
    def from_synth(cls, prefix: str = "") -> LocalIam:
        from devstack.iam.synth import synthesized

        return cls(synthesized(), prefix=prefix)

    @property
    def on(self) -> bool:
        return self.checker is not None

    def moto_env(self) -> dict[str, str]:
        """What the embedded AWS needs to check every call."""
        if self.book_path is None:
            return {}
        return {BOOK_ENV: str(self.book_path), PREFIX_ENV: self.prefix}

    def env(self, principal: str) -> dict[str, str]:
        """Credentials of ``principal`` (e.g. ``function/api``, ``worker/standard``)."""
        if not self.on:
            return {}
        assert self.checker is not None
        if principal not in self.checker.book.principals:
            raise KeyError(f"the template has no principal {principal!r}")
        return {"AWS_ACCESS_KEY_ID": access_key(principal), "AWS_SECRET_ACCESS_KEY": SECRET}

    def clients(self, principal: str) -> AwsClients:
        """A client factory acting as ``principal`` (the operator's when IAM is off)."""

        def client(service: str) -> Any:
            from pagefleet.runtime import RUNTIME

            if not self.on:
                return RUNTIME.client(service)
            with self._lock:
                key = (principal, service)
                if key not in self._clients:
                    import boto3

                    session = boto3.session.Session(
                        aws_access_key_id=self.env(principal)["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=SECRET,
                        region_name=LOCAL_REGION,
                    )
                    self._clients[key] = session.client(  # type: ignore[call-overload]
                        service, endpoint_url=os.environ.get("AWS_ENDPOINT_URL")
                    )
                return self._clients[key]

        return client

    def report(self, aws_endpoint: str) -> dict[str, Any]:
        """Calls checked per principal and every denial, here and in the embedded AWS."""
        if self.checker is None:
            return merge_reports()
        with httpx.Client(trust_env=False, timeout=10) as http:
            embedded = http.get(f"{aws_endpoint}{REPORT_PATH}").json()
        return merge_reports(embedded, self.checker.report())


def summary(report: dict[str, Any]) -> str:
    """The deploy check's line: ``iam: N calls by M principals checked, K denied``."""
    calls = report.get("calls", {})
    return (
        f"iam: {sum(calls.values())} calls by {len(calls)} principals checked, "
        f"{len(report.get('denied', []))} denied"
    )
