"""Presigned S3 URLs that run out in the embedded AWS, as S3's do.

moto serves a presigned request whatever its age: a link the API made five minutes ago
still downloads here, so a page that keeps links and follows them later works locally and
shows S3's refusal on AWS. S3 takes a SigV4 presigned request (``X-Amz-Algorithm``,
``X-Amz-Date``, ``X-Amz-Expires`` in the query) only until ``X-Amz-Date`` plus
``X-Amz-Expires`` seconds, and a link's life is at most seven days (604,800 seconds); see
the S3 user guide, "Download and upload objects with presigned URLs", and docs/decisions.md
(2026-12-07). This WSGI middleware answers as S3 does:

- past its time: ``403 AccessDenied`` "Request has expired", with the link's
  ``X-Amz-Expires``, when it ran out (``Expires``) and the server's time, as S3's body has
  (a Signature Version 2 link, whose ``Expires`` is its end in epoch seconds, alike);
- a life over a week, or an ``X-Amz-Expires`` or ``X-Amz-Date`` that is not one:
  ``400 AuthorizationQueryParametersError``.

- a Signature Version 4 link whose signature is not its own (its URL changed after it was
  signed: a parameter added or edited, another host or path; or signed with another key):
  ``403 SignatureDoesNotMatch``, as S3 answers. The signature is computed again from the
  request as S3 computes it; the secret is the signer's where the embedded AWS knows it (a
  local principal's, the operator's, a session moto issued) and the link passes unchecked
  otherwise.

A link whose signing credentials ran out before it did is refused by
``devstack.sts_lifetime`` (``ExpiredToken``), as S3 refuses it. The rule is on with the
strict rules (``StrictRules.s3_presigned_expiry``); the clock is the server's (a test's
may be given).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, quote, unquote
from xml.sax.saxutils import escape

# S3: "the maximum expiration time for presigned URLs is 7 days" with Signature Version 4.
MAX_EXPIRES_S = 604_800
_DATE = "%Y%m%dT%H%M%SZ"
_WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class PresignedExpiry:
    """WSGI middleware: see the module docstring."""

    def __init__(
        self,
        app: _WsgiApp,
        *,
        clock: Callable[[], float] = time.time,
        enforced: Callable[[], bool] = lambda: True,
        secrets: Callable[[str], str | None] | None = None,
    ) -> None:
        self._app = app
        self._clock = clock
        self._enforced = enforced
        self._secret = secrets or known_secret
        self.refused = 0  # presigned requests answered as expired or malformed

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        query = str(environ.get("QUERY_STRING", ""))
        # A cheap look first: every other request passes through untouched.
        if "Expires=" not in query or not self._enforced():
            return self._app(environ, start_response)
        params = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        head = environ.get("REQUEST_METHOD") == "HEAD"
        if params.get("X-Amz-Algorithm") == "AWS4-HMAC-SHA256":
            answer = self._refusal(params, head=head) or self._forged(environ, params, head)
        elif "AWSAccessKeyId" in params and "Signature" in params:
            answer = self._legacy_refusal(params.get("Expires", ""), head=head)
        else:
            return self._app(environ, start_response)
        if answer is None:
            return self._app(environ, start_response)
        self.refused += 1
        status, body = answer
        start_response(status, [("Content-Type", "application/xml")])
        return [body]

    def _refusal(self, params: dict[str, str], *, head: bool) -> tuple[str, bytes] | None:
        raw_expires, raw_date = params.get("X-Amz-Expires", ""), params.get("X-Amz-Date", "")
        if not raw_expires.isdigit():
            return _malformed("X-Amz-Expires should be a number", head)
        expires = int(raw_expires)
        if expires > MAX_EXPIRES_S:
            return _malformed(
                f"X-Amz-Expires must be less than a week (in seconds) that is {MAX_EXPIRES_S}",
                head,
            )
        try:
            signed = datetime.strptime(raw_date, _DATE).replace(tzinfo=UTC).timestamp()
        except ValueError:
            return _malformed(f"X-Amz-Date must be in the ISO8601 Long Format: {raw_date}", head)
        return self._expired(signed + expires, f"<X-Amz-Expires>{expires}</X-Amz-Expires>", head)

    def _forged(
        self, environ: dict[str, Any], params: dict[str, str], head: bool
    ) -> tuple[str, bytes] | None:
        """S3's answer when the link's signature is not the one its request makes."""
        key, _, scope = params.get("X-Amz-Credential", "").partition("/")
        secret = self._secret(key)
        if secret is None:
            return None  # a signer the embedded AWS does not know: moto's own leniency
        expected = v4_query_signature(environ, params, scope, secret)
        if hmac.compare_digest(expected, params.get("X-Amz-Signature", "")):
            return None
        message = (
            "The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method."
        )
        return "403 Forbidden", _body("SignatureDoesNotMatch", message, "", head)

    def _legacy_refusal(self, raw_expires: str, *, head: bool) -> tuple[str, bytes] | None:
        """Signature Version 2's query (``Expires``: the end, in epoch seconds)."""
        if not raw_expires.isdigit():
            return "403 Forbidden", _body("AccessDenied", "Invalid date", "", head)
        return self._expired(int(raw_expires), "", head)

    def _expired(self, end: float, extra: str, head: bool) -> tuple[str, bytes] | None:
        now = self._clock()
        if now <= end:
            return None
        extra += f"<Expires>{_iso(end)}</Expires><ServerTime>{_iso(now)}</ServerTime>"
        return "403 Forbidden", _body("AccessDenied", "Request has expired", extra, head)


def _malformed(message: str, head: bool) -> tuple[str, bytes]:
    return "400 Bad Request", _body("AuthorizationQueryParametersError", message, "", head)


def _body(code: str, message: str, extra: str, head: bool) -> bytes:
    if head:  # S3 answers a HEAD with the status alone
        return b""
    xml = f"<Error><Code>{code}</Code><Message>{escape(message)}</Message>{extra}</Error>"
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{xml}'.encode()


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def known_secret(access_key: str) -> str | None:
    """The secret a key the embedded AWS knows signs with: a local principal's (``pf-...``),
    the operator's, or a session moto issued (AssumeRole); None for any other."""
    from devstack.constants import LOCAL_ACCOUNT
    from devstack.iam.guard import OPERATOR_KEYS
    from devstack.iam.local import SECRET

    if access_key.startswith("pf-"):
        return SECRET
    if access_key in OPERATOR_KEYS:
        return access_key  # the operator's key is its own secret (devstack.constants.aws_env)
    from moto.sts.models import sts_backends

    for assumed in sts_backends[LOCAL_ACCOUNT]["aws"].assumed_roles:
        if assumed.access_key_id == access_key:
            return str(assumed.secret_access_key)
    return None


def v4_query_signature(
    environ: dict[str, Any], params: dict[str, str], scope: str, secret: str
) -> str:
    """A presigned request's Signature Version 4, as S3 computes it from what arrived: the
    method, the path, every query parameter but the signature, the signed headers' values,
    an unsigned payload."""
    raw_path, _, raw_query = str(environ.get("REQUEST_URI", "")).partition("?")
    pairs = []
    for part in filter(None, raw_query.split("&")):
        name, _, value = part.partition("=")
        name, value = unquote(name), unquote(value)
        if name != "X-Amz-Signature":
            pairs.append((quote(name, safe="-_.~"), quote(value, safe="-_.~")))
    signed = params.get("X-Amz-SignedHeaders", "host").split(";")
    headers = "".join(f"{name}:{' '.join(_header(environ, name).split())}\n" for name in signed)
    canonical = "\n".join(
        [
            str(environ.get("REQUEST_METHOD", "GET")),
            quote(unquote(raw_path), safe="/~"),
            "&".join(f"{k}={v}" for k, v in sorted(pairs)),
            headers,
            ";".join(signed),
            params.get("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"),
        ]
    )
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            params.get("X-Amz-Date", ""),
            scope,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = ("AWS4" + secret).encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _header(environ: dict[str, Any], name: str) -> str:
    if name == "host":
        return str(environ.get("HTTP_HOST", ""))
    if name in ("content-type", "content-length"):
        return str(environ.get(name.upper().replace("-", "_"), ""))
    return str(environ.get("HTTP_" + name.upper().replace("-", "_"), ""))
