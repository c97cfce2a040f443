"""Saved login sessions: Playwright storage state (cookies + local storage) per tenant.

Kept in the artifacts bucket under ``<tenant>/sessions/<name>.json`` — outside any job's
prefix, so no artifact listing or presigned artifact link can reach it, and inside the
tenant's prefix, so the tenant's job role reaches it and no other tenant's does — encrypted
at rest (SSE-KMS when a key is configured, else SSE-S3). Each session expires
``session_days`` after it was saved (the tenant's limit, 30 days by default): an expired
session is never loaded, and the bucket's ``session`` rule removes old ones for good.

The worker saves and loads them (``browser_task.tenant.logins``); the API lists, shows and
deletes them (``GET/DELETE /v1/sessions``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pagefleet import ids
from pagefleet.jobs.models import iso
from pagefleet.specs.resources import ARTIFACTS_BUCKET, SESSION

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

StorageState = dict[str, Any]

# A storage state is cookies and local storage; a few MB means something is wrong.
MAX_SESSION_BYTES = 5 * 1024 * 1024
NAME_PATTERN = ids.SAVED_LOGIN_NAME
_SAVED = "saved-at"
_EXPIRES = "expires-at"


def session_prefix(tenant_id: str) -> str:
    return f"{tenant_id}/sessions/"


def session_key(tenant_id: str, name: str) -> str:
    return f"{session_prefix(tenant_id)}{name}.json"


@dataclass(frozen=True)
class SessionInfo:
    name: str
    size: int
    saved_at: int | None  # epoch seconds
    expires_at: int | None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def as_view(self, now: float) -> dict[str, Any]:
        def when(epoch: int | None) -> str | None:
            return iso(datetime.fromtimestamp(epoch, UTC)) if epoch is not None else None

        return {
            "name": self.name,
            "size": self.size,
            "saved_at": when(self.saved_at),
            "expires_at": when(self.expires_at),
            "expired": self.expired(now),
        }


def _epoch(metadata: dict[str, str], name: str) -> int | None:
    # Metadata names are HTTP headers, case-insensitive: S3 answers them in lower case, the
    # local stack's embedded AWS capitalized.
    value = next((v for k, v in metadata.items() if k.lower() == name), None)
    return int(value) if value and value.isdigit() else None


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def _missing(exc: Exception) -> bool:
    return _code(exc) in {"NoSuchKey", "404", "NotFound"}


def _refused(exc: Exception) -> bool:
    return _code(exc) in {"AccessDenied", "403", "Forbidden"}


class SessionArchive:
    """The tenant's saved logins in S3 (synchronous; the worker wraps it in threads)."""

    def __init__(self, client: S3Client, bucket: str, *, kms_key_id: str | None = None) -> None:
        self._s3 = client
        self._bucket = bucket
        self._kms_key_id = kms_key_id

    def load(self, tenant_id: str, name: str, *, now: float) -> StorageState | None:
        """The saved state; None when never saved or expired (an expired one is unusable)."""
        try:
            answer = self._s3.get_object(Bucket=self._bucket, Key=session_key(tenant_id, name))
        except Exception as exc:
            if _missing(exc) or (_refused(exc) and self._absent(tenant_id, name)):
                return None
            raise
        expires = _epoch(answer.get("Metadata", {}), _EXPIRES)
        if expires is not None and expires <= now:
            return None
        state = json.loads(answer["Body"].read())
        return state if isinstance(state, dict) else None

    def save(
        self, tenant_id: str, name: str, state: StorageState, *, ttl_s: int, now: float
    ) -> SessionInfo:
        body = json.dumps(state, separators=(",", ":")).encode()
        if len(body) > MAX_SESSION_BYTES:
            raise ValueError(f"session state is {len(body)} bytes, over {MAX_SESSION_BYTES}")
        encryption: dict[str, str] = {"ServerSideEncryption": "AES256"}
        if self._kms_key_id:
            encryption = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self._kms_key_id}
        saved, expires = int(now), int(now) + ttl_s
        self._s3.put_object(
            Bucket=self._bucket,
            Key=session_key(tenant_id, name),
            Body=body,
            ContentType="application/json",
            Metadata={_SAVED: str(saved), _EXPIRES: str(expires)},
            Tagging=f"{ARTIFACTS_BUCKET.retention_tag}={SESSION}",
            **encryption,  # type: ignore[arg-type]
        )
        return SessionInfo(name, len(body), saved, expires)

    def info(self, tenant_id: str, name: str) -> SessionInfo | None:
        try:
            head = self._s3.head_object(Bucket=self._bucket, Key=session_key(tenant_id, name))
        except Exception as exc:
            if _missing(exc) or (_refused(exc) and self._absent(tenant_id, name)):
                return None
            raise
        metadata = head.get("Metadata", {})
        return SessionInfo(
            name,
            int(head.get("ContentLength", 0)),
            _epoch(metadata, _SAVED),
            _epoch(metadata, _EXPIRES),
        )

    def _absent(self, tenant_id: str, name: str) -> bool:
        """After a 403: is the session simply not there? S3 answers a missing key 403 to a
        caller it does not let list that key; a 403 is not read as "never saved" unless a
        listing of exactly that key (the tenant's role may list its own prefix) shows it
        absent. A refused listing, or the key present, leaves the 403 standing: a real
        refusal (a wrong tenant, a key policy) must not pass for a missing session."""
        key = session_key(tenant_id, name)
        try:
            page = self._s3.list_objects_v2(Bucket=self._bucket, Prefix=key, MaxKeys=1)
        except Exception:
            return False
        return not any(item.get("Key") == key for item in page.get("Contents", []))

    def list(self, tenant_id: str, limit: int = 1000) -> list[SessionInfo]:
        prefix = session_prefix(tenant_id)
        names: list[str] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self._bucket, Prefix=prefix
        ):
            for item in page.get("Contents", []):
                key = item.get("Key", "")
                name = key[len(prefix) :].removesuffix(".json")
                if key.endswith(".json") and re.fullmatch(NAME_PATTERN, name):
                    names.append(name)
            if len(names) >= limit:
                break
        found = (self.info(tenant_id, name) for name in sorted(names)[:limit])
        return [info for info in found if info is not None]

    def delete(self, tenant_id: str, name: str) -> bool:
        """Remove a session; False when there was none (deleting twice is not an error)."""
        existed = self.info(tenant_id, name) is not None
        self._s3.delete_object(Bucket=self._bucket, Key=session_key(tenant_id, name))
        return existed
