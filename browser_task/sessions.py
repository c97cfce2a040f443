"""Saved login sessions: Playwright storage state (cookies + local storage) per tenant.

Kept in the artifacts bucket under ``<tenant>/sessions/<name>.json`` — outside any job's
prefix, so no artifact listing or presigned artifact link can reach it — and encrypted at
rest: SSE-KMS when a key is configured, else SSE-S3 (the bucket's own default on AWS).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Protocol

StorageState = dict[str, Any]

# A storage state is cookies and local storage; a few MB means something is wrong.
MAX_SESSION_BYTES = 5 * 1024 * 1024


def session_key(tenant_id: str, name: str) -> str:
    return f"{tenant_id}/sessions/{name}.json"


class SessionStore(Protocol):
    async def load(self, tenant_id: str, name: str) -> StorageState | None: ...

    async def save(self, tenant_id: str, name: str, state: StorageState) -> None: ...


class S3SessionStore:
    def __init__(self, client: Any, bucket: str, *, kms_key_id: str | None = None) -> None:
        self._s3 = client
        self._bucket = bucket
        self._kms_key_id = kms_key_id

    async def load(self, tenant_id: str, name: str) -> StorageState | None:
        return await asyncio.to_thread(self._load, tenant_id, name)

    async def save(self, tenant_id: str, name: str, state: StorageState) -> None:
        body = json.dumps(state, separators=(",", ":")).encode()
        if len(body) > MAX_SESSION_BYTES:
            raise ValueError(f"session state is {len(body)} bytes, over {MAX_SESSION_BYTES}")
        await asyncio.to_thread(self._save, tenant_id, name, body)

    def _load(self, tenant_id: str, name: str) -> StorageState | None:
        try:
            answer = self._s3.get_object(Bucket=self._bucket, Key=session_key(tenant_id, name))
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
            if code in {"NoSuchKey", "404"}:
                return None
            raise
        state = json.loads(answer["Body"].read())
        return state if isinstance(state, dict) else None

    def _save(self, tenant_id: str, name: str, body: bytes) -> None:
        encryption: dict[str, str] = {"ServerSideEncryption": "AES256"}
        if self._kms_key_id:
            encryption = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self._kms_key_id}
        self._s3.put_object(
            Bucket=self._bucket,
            Key=session_key(tenant_id, name),
            Body=body,
            ContentType="application/json",
            **encryption,
        )


class MemorySessionStore:
    """In-memory store, for tests and single-process tools."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, str], StorageState] = {}

    async def load(self, tenant_id: str, name: str) -> StorageState | None:
        return self.states.get((tenant_id, name))

    async def save(self, tenant_id: str, name: str, state: StorageState) -> None:
        self.states[(tenant_id, name)] = state
