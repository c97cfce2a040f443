"""Credentials that expire in the embedded AWS: short AssumeRole sessions, refused once over.

moto answers AssumeRole with the duration asked for and never looks at a session's
expiration again, so code that keeps using credentials past their end works locally and
fails on AWS. This WSGI middleware (outside the IAM check) makes the local stack behave
as AWS does, and sooner:

- every AssumeRole answer expires ``lifetime_s`` after it is issued (minutes by default,
  under AWS's 900-second minimum on purpose: a long job in a test meets an expiry);
- a call signed with a session key past its expiration is refused with ``ExpiredToken``
  in the service's own error shape, as AWS refuses it;
- AssumeRole's ``DurationSeconds`` is checked as AWS checks it: at least 900, and at most
  an hour when the caller is itself a role session (role chaining). Every local principal
  but the operator stands for a role (a function's, a task's), so their AssumeRole is
  chained.
- So are its ``RoleSessionName`` (2 to 64 of ASCII letters, digits and ``_+=,.@-``) and its
  session tags (at most 50; a key 1 to 128 characters, a value up to 256, each of letters,
  digits and spaces of any script and ``_.:/=+-@``), which moto takes as they come (it
  checks only a name's 64): a name or tag built from a tenant's id fails here as on AWS.

``GET /_pagefleet/sts`` reports the sessions issued and the calls refused as expired.
"""

from __future__ import annotations

import io
import json
import os
import re
import string
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from devstack.iam.calls import Wire, credential, form_fields, session_tags
from devstack.iam.guard import OPERATOR_KEYS, call_app, refusal, wire_of

LIFETIME_ENV = "PAGEFLEET_LOCAL_STS_LIFETIME_S"
# Five minutes: a local job of a few minutes already outlives its first credentials.
DEFAULT_LIFETIME_S = 300.0
REPORT_PATH = "/_pagefleet/sts"
# AWS STS AssumeRole: DurationSeconds from 900 s; a role session's AssumeRole (role
# chaining) is limited to one hour.
MIN_DURATION_S = 900
CHAINED_MAX_S = 3600
# AssumeRole's role session name and session tags (the STS API reference's constraints).
SESSION_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_+=,.@-")
SESSION_NAME_PATTERN = r"[\w+=,.@-]*"
TAG_PATTERN = r"[\p{L}\p{Z}\p{N}_.:/=+\-@]"
MAX_TAGS = 50
TAG_KEY_MAX = 128
TAG_VALUE_MAX = 256
_WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_ISSUED_KEY = re.compile(rb"<AccessKeyId>([^<]+)</AccessKeyId>")
_EXPIRATION = re.compile(rb"<Expiration>[^<]*</Expiration>")
_EXPIRED = {
    "s3": "The provided token has expired.",
}
_EXPIRED_DEFAULT = "The security token included in the request is expired"


def lifetime_from_env(env: dict[str, str] | None = None) -> float | None:
    """The lifetime asked for (``0`` or ``off``: moto's own, unchecked)."""
    raw = (env if env is not None else os.environ).get(LIFETIME_ENV, "").strip().lower()
    if raw in ("0", "off", "false", "no"):
        return None
    return float(raw) if raw else DEFAULT_LIFETIME_S


class CredentialLifetimes:
    """WSGI middleware: see the module docstring."""

    def __init__(
        self,
        app: _WsgiApp,
        *,
        lifetime_s: float,
        clock: Callable[[], float] = time.time,
        operator_keys: frozenset[str] = OPERATOR_KEYS,
    ) -> None:
        if lifetime_s <= 0:
            raise ValueError("lifetime_s must be > 0")
        self._app = app
        self.lifetime_s = lifetime_s
        self._clock = clock
        self._operator = operator_keys
        self._lock = threading.Lock()
        self._expires: dict[str, float] = {}  # session access key -> expiry (epoch s)
        self.issued = 0
        self.refused: list[dict[str, Any]] = []  # {"key", "service", "late_s"}

    def expiry_of(self, key: str) -> float | None:
        with self._lock:
            return self._expires.get(key)

    def report(self) -> dict[str, Any]:
        with self._lock:
            return {
                "lifetime_s": self.lifetime_s,
                "issued": self.issued,
                "expired_refused": list(self.refused),
            }

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = str(environ.get("PATH_INFO", ""))
        if path == REPORT_PATH:
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps(self.report()).encode()]
        if path.startswith(("/moto-api", "/_pagefleet")):
            return self._app(environ, start_response)
        size = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(size) if size else b""
        environ["wsgi.input"] = io.BytesIO(body)
        wire = wire_of(environ, body)
        found = credential(wire)
        if found is None:
            return self._app(environ, start_response)
        key, _, service = found
        now = self._clock()
        expires = self.expiry_of(key)
        if expires is not None and now >= expires:
            with self._lock:
                self.refused.append({"key": key, "service": service, "late_s": now - expires})
            message = _EXPIRED.get(service, _EXPIRED_DEFAULT)
            return _answer(start_response, refusal(service, wire, "ExpiredToken", message))
        if service != "sts" or _action(wire) != "AssumeRole":
            return self._app(environ, start_response)
        invalid = self._invalid_duration(key, wire) or invalid_names(form_fields(wire))
        if invalid is not None:
            return _answer(start_response, refusal("sts", wire, "ValidationError", invalid))
        return self._assume(environ, start_response)

    def _invalid_duration(self, key: str, wire: Wire) -> str | None:
        raw = form_fields(wire).get("DurationSeconds")
        if raw is None:
            return None
        try:
            duration = int(raw)
        except ValueError:
            return f"Value '{raw}' at 'durationSeconds' failed to satisfy constraint"
        if duration < MIN_DURATION_S:
            return (
                f"1 validation error detected: Value '{duration}' at 'durationSeconds' failed "
                f"to satisfy constraint: Member must have value greater than or equal to "
                f"{MIN_DURATION_S}"
            )
        if key not in self._operator and duration > CHAINED_MAX_S:
            return (
                "The requested DurationSeconds exceeds the 1 hour session limit for roles "
                "assumed by role chaining."
            )
        return None

    def _assume(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        status, headers, answer = call_app(self._app, environ)
        issued = _ISSUED_KEY.search(answer)
        if status.startswith("200") and issued:
            expires = self._clock() + self.lifetime_s
            stamp = datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            answer = _EXPIRATION.sub(f"<Expiration>{stamp}</Expiration>".encode(), answer)
            with self._lock:
                self._expires[issued.group(1).decode()] = expires
                self.issued += 1
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            headers.append(("Content-Length", str(len(answer))))
        start_response(status, headers)
        return [answer]


def invalid_names(fields: dict[str, str]) -> str | None:
    """Why AWS refuses an AssumeRole's session name or tags, in its words (None: it does not)."""
    name = fields.get("RoleSessionName", "")
    if not 2 <= len(name) <= 64:
        return _violation(name, "roleSessionName", "have length between 2 and 64")
    if not set(name) <= SESSION_NAME_CHARS:
        pattern = f"satisfy regular expression pattern: {SESSION_NAME_PATTERN}"
        return _violation(name, "roleSessionName", pattern)
    tags = session_tags(fields)
    if len(tags) > MAX_TAGS:
        return _violation(
            f"{len(tags)} tags", "tags", f"have length less than or equal to {MAX_TAGS}"
        )
    for index, (key, value) in enumerate(tags, start=1):
        for text, part, least, most in (
            (key, "key", 1, TAG_KEY_MAX),
            (value, "value", 0, TAG_VALUE_MAX),
        ):
            where = f"tags.{index}.member.{part}"
            if not least <= len(text) <= most:
                return _violation(text, where, f"have length between {least} and {most}")
            if not all(_tag_char(c) for c in text):
                suffix = "+" if part == "key" else "*"
                return _violation(
                    text, where, f"satisfy regular expression pattern: {TAG_PATTERN}{suffix}"
                )
    return None


def _tag_char(char: str) -> bool:
    return unicodedata.category(char)[0] in "LZN" or char in "_.:/=+-@"


def _violation(value: str, where: str, rule: str) -> str:
    return (
        f"1 validation error detected: Value '{value}' at '{where}' failed to satisfy "
        f"constraint: Member must {rule}"
    )


def _action(wire: Wire) -> str:
    return form_fields(wire).get("Action", "")


def _answer(start_response: Callable[..., Any], shaped: tuple[str, list[Any], bytes]) -> Any:
    """An error as AWS sends it: the service's shape, status 400 (an expired token and a
    bad parameter are the caller's to fix, not a permission)."""
    _, headers, body = shaped
    start_response("400 Bad Request", headers)
    return [body]
