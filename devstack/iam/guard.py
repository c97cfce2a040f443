"""IAM in front of the embedded AWS: every call checked against its caller's template policies.

The caller is known by the access key it signs with: each local principal's process gets
its own static key (``book.access_key``), and an AssumeRole that IAM allows registers the
session's key with the role's policies and the session's tags. The operator's key (the
local stack itself provisioning, tests, the CLI's admin commands) is the account's own and
is not checked, as an account administrator's would not be limited by these policies.

A call the caller's policies do not allow is answered as AWS answers it (the service's own
AccessDenied shape, so the SDK raises what it raises on AWS) and logged with the principal,
the action and the resource. As on AWS:
- AssumeRole also needs the role's trust policy to allow it (``aws:PrincipalArn``, the
  session tags as ``aws:RequestTag/*`` and ``aws:TagKeys``);
- GetObject or HeadObject of a missing key is a 403 to a caller who may not list that key
  (``s3:ListBucket`` with ``s3:prefix`` = the key), a 404 only to one who may.

``GET /_pagefleet/iam`` reports the calls checked per principal, the denials, and the time
the checks took.
"""

from __future__ import annotations

import io
import json
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

from devstack.iam.book import Book, Principal
from devstack.iam.calls import Wire, credential, requests_for
from devstack.iam.policy import Decision, Request, evaluate

log = logging.getLogger("devstack.iam")

REPORT_PATH = "/_pagefleet/iam"
OPERATOR_KEYS = frozenset({"testing"})
_UNCHECKED_PATHS = ("/moto-api", "/_pagefleet")
_WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_MAX_DECISIONS = 20_000


def _frozen(context: Any) -> frozenset[tuple[str, Any]]:
    return frozenset(context.items())


@dataclass(frozen=True)
class Denial:
    principal: str
    action: str
    resource: str
    reason: str  # "implicit deny", "explicit deny", "trust policy", "unknown access key"

    def message(self, caller: str) -> str:
        why = {
            "implicit deny": f"because no identity-based policy allows the {self.action} action",
            "explicit deny": "with an explicit deny in an identity-based policy",
            "trust policy": "because the role's trust policy does not allow it",
        }.get(self.reason, f"({self.reason})")
        return (
            f"User: {caller} is not authorized to perform: {self.action} on resource: "
            f"{self.resource} {why}"
        )


class Checker:
    """Who is calling and whether the template lets them; counts everything (thread-safe)."""

    def __init__(self, book: Book, operator_keys: frozenset[str] = OPERATOR_KEYS) -> None:
        self.book = book
        self._keys = book.by_key()
        self._operator = operator_keys
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.denied: list[Denial] = []
        self.operator_calls = 0
        self.check_seconds = 0.0
        self.checks = 0
        self._decisions: dict[tuple[Any, ...], Decision] = {}

    def caller(self, key: str) -> Principal | None:
        with self._lock:
            return self._keys.get(key)

    def is_operator(self, key: str) -> bool:
        return key in self._operator

    def register_session(self, key: str, principal: Principal) -> None:
        with self._lock:
            self._keys[key] = principal

    def allowed(self, principal: Principal, request: Request) -> Decision:
        # A job asks the same few questions over and over: answers are kept (bounded).
        key = (principal.label, request.action, request.resource, _frozen(request.context))
        found = self._decisions.get(key)
        if found is None:
            context = {**principal.context(), **request.context}
            asked = Request(request.action, request.resource, context, principal.role_arn)
            found = evaluate(principal.policies, asked)
            if len(self._decisions) >= _MAX_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = found
        return found

    def check(self, principal: Principal, requests: list[Request]) -> Denial | None:
        for request in requests:
            decision = self.allowed(principal, request)
            if decision is not Decision.ALLOW:
                return Denial(principal.label, request.action, request.resource, decision.value)
        return None

    def trusts(self, caller: Principal, role: Principal, requests: list[Request]) -> bool:
        """The role's trust policy lets ``caller`` assume it with these tags."""
        if role.trust is None:
            return False
        for request in requests:
            context = {**caller.context(), **request.context}
            asked = Request(request.action, role.role_arn, context, caller.role_arn)
            if evaluate((role.trust,), asked) is not Decision.ALLOW:
                return False
        return True

    def record(self, principal: str, denial: Denial | None, took: float) -> None:
        with self._lock:
            self.calls[principal] += 1
            self.checks += 1
            self.check_seconds += took
            if denial is not None:
                self.denied.append(denial)
        if denial is not None:
            log.warning(
                "IAM denied %s: %s on %s (%s)",
                denial.principal,
                denial.action,
                denial.resource,
                denial.reason,
            )

    def count_operator(self) -> None:
        with self._lock:
            self.operator_calls += 1

    def report(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": dict(self.calls),
                "denied": [asdict(d) for d in self.denied],
                "operator_calls": self.operator_calls,
                "check_seconds": self.check_seconds,
                "checks": self.checks,
            }


def merge_reports(*reports: dict[str, Any]) -> dict[str, Any]:
    calls: Counter[str] = Counter()
    out: dict[str, Any] = {"denied": [], "operator_calls": 0, "check_seconds": 0.0, "checks": 0}
    for report in reports:
        calls.update(report.get("calls", {}))
        out["denied"] += report.get("denied", [])
        for key in ("operator_calls", "check_seconds", "checks"):
            out[key] += report.get(key, 0)
    out["calls"] = dict(calls)
    return out


# --- the wire --------------------------------------------------------------------------------
def wire_of(environ: dict[str, Any], body: bytes) -> Wire:
    headers = {
        key[5:].replace("_", "-").lower(): str(value)
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = str(environ["CONTENT_TYPE"])
    return Wire(
        method=str(environ.get("REQUEST_METHOD", "GET")),
        path=unquote(str(environ.get("PATH_INFO", ""))),
        query=parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True),
        headers=headers,
        body=body,
    )


def call_app(app: Callable[..., Any], environ: dict[str, Any]) -> tuple[str, list[Any], bytes]:
    """The inner WSGI app's status, headers and whole body, so a wrapper can judge or change
    the answer before it sends it."""
    captured: list[Any] = []

    def start(status: str, headers: list[Any], exc_info: Any = None) -> Callable[..., Any]:
        captured[:] = [status, headers]
        return lambda data: None

    chunks = app(environ, start)
    try:
        body = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return captured[0], captured[1], body


def refusal(service: str, wire: Wire, code: str, message: str) -> tuple[str, list[Any], bytes]:
    """(status, headers, body) of an error as ``service`` sends it on AWS."""
    target = wire.header("x-amz-target")
    if service == "dynamodb" or (target and service in ("secretsmanager", "events")):
        kind = (
            f"com.amazonaws.dynamodb.v20120810#{code}Exception"
            if service == "dynamodb"
            else (f"{code}Exception")
        )
        body = json.dumps({"__type": kind, "message": message}).encode()
        return "400 Bad Request", [("Content-Type", "application/x-amz-json-1.1")], body
    if service == "sqs" and target:
        body = json.dumps({"__type": f"com.amazonaws.sqs#{code}", "message": message}).encode()
        headers = [
            ("Content-Type", "application/x-amz-json-1.0"),
            ("x-amzn-query-error", f"{code};Sender"),
        ]
        return "403 Forbidden", headers, body
    if service == "scheduler":
        body = json.dumps({"Message": message}).encode()
        headers = [("Content-Type", "application/json"), ("x-amzn-ErrorType", f"{code}Exception")]
        return "403 Forbidden", headers, body
    if service == "s3":
        xml = f"<Error><Code>{code}</Code><Message>{_xml(message)}</Message></Error>"
        body = b"" if wire.method == "HEAD" else f'<?xml version="1.0"?>{xml}'.encode()
        return "403 Forbidden", [("Content-Type", "application/xml")], body
    xml = (
        "<ErrorResponse><Error><Type>Sender</Type>"
        f"<Code>{code}</Code><Message>{_xml(message)}</Message></Error></ErrorResponse>"
    )
    return "403 Forbidden", [("Content-Type", "text/xml")], xml.encode()


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_ACCESS_KEY = re.compile(rb"<AccessKeyId>([^<]+)</AccessKeyId>")


class IamGuard:
    """WSGI middleware in front of moto's application (see the module docstring)."""

    def __init__(self, app: _WsgiApp, checker: Checker) -> None:
        self._app = app
        self.checker = checker

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = str(environ.get("PATH_INFO", ""))
        if path == REPORT_PATH:
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps(self.checker.report()).encode()]
        if path.startswith(_UNCHECKED_PATHS):
            return self._app(environ, start_response)
        size = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(size) if size else b""
        environ["wsgi.input"] = io.BytesIO(body)
        started = time.perf_counter()
        wire = wire_of(environ, body)
        found = credential(wire)
        if found is None:
            return self._refuse(start_response, "s3", wire, "AccessDenied", "Anonymous access")
        key, _, service = found
        if self.checker.is_operator(key):
            self.checker.count_operator()
            return self._app(environ, start_response)
        caller = self.checker.caller(key)
        if caller is None:
            denial = Denial(key, "*", "*", "unknown access key")
            self.checker.record(f"unknown key {key}", denial, time.perf_counter() - started)
            return self._refuse(
                start_response, service, wire, "InvalidClientTokenId", "unknown access key"
            )
        return self._checked(environ, start_response, wire, caller, service, started)

    def _checked(
        self,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        wire: Wire,
        caller: Principal,
        service: str,
        started: float,
    ) -> Any:
        requests = requests_for(wire, service, self.checker.book.account)
        denial = self.checker.check(caller, requests)
        role = None
        if denial is None and service == "sts" and requests[:1]:
            role = self.checker.book.by_role(requests[0].resource)
            if role is None or not self.checker.trusts(caller, role, requests):
                denial = Denial(
                    caller.label, "sts:AssumeRole", requests[0].resource, "trust policy"
                )
        took = time.perf_counter() - started
        if denial is not None:
            self.checker.record(caller.name, denial, took)
            return self._refuse(
                start_response, service, wire, "AccessDenied", denial.message(caller.session_arn)
            )
        status, headers, answer = call_app(self._app, environ)
        started = time.perf_counter()
        if role is not None and status.startswith("200"):
            issued = _ACCESS_KEY.search(answer)
            if issued:
                tags = {
                    k.split("/", 1)[1]: str(v)
                    for k, v in requests[0].context.items()
                    if k.startswith("aws:requesttag/")
                }
                self.checker.register_session(issued.group(1).decode(), role.tagged(tags))
        if service == "s3" and status.startswith("404") and wire.method in ("GET", "HEAD"):
            denial = self._hidden_missing_key(caller, wire)
        self.checker.record(caller.name, denial, took + time.perf_counter() - started)
        if denial is not None:
            return self._refuse(
                start_response, service, wire, "AccessDenied", denial.message(caller.session_arn)
            )
        start_response(status, headers)
        return [answer]

    def _hidden_missing_key(self, caller: Principal, wire: Wire) -> Denial | None:
        """S3 tells a missing key (404) only to a caller allowed to list it."""
        bucket, _, key = wire.path.lstrip("/").partition("/")
        if not key:
            return None
        listing = Request("s3:ListBucket", f"arn:aws:s3:::{bucket}", {"s3:prefix": key})
        if self.checker.allowed(caller, listing) is Decision.ALLOW:
            return None
        return Denial(
            caller.label,
            "s3:GetObject",
            f"arn:aws:s3:::{bucket}/{key}",
            "missing key, no s3:ListBucket",
        )

    @staticmethod
    def _refuse(
        start_response: Callable[..., Any], service: str, wire: Wire, code: str, message: str
    ) -> list[bytes]:
        status, headers, body = refusal(service, wire, code, message)
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [body]
