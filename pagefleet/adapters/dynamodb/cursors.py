"""Opaque pagination cursors bound to their tenant and to the listing that issued them."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from pagefleet.adapters.dynamodb.codec import job_sk, status_pk, tenant_pk
from pagefleet.errors import InvalidRequest
from pagefleet.ids import ULID_CHARS
from pagefleet.jobs.ports import NO_FILTER, JobFilter
from pagefleet.jobs.states import JobStatus

_JOB_SK = re.compile(f"^JOB#{ULID_CHARS}$")
_MAX_CURSOR_CHARS = 4096
# The digest of the listing's other filters (name, workflow, schedule), when it has any.
_FILTER = "f"


class CursorCodec:
    """A cursor is the base64 of DynamoDB's LastEvaluatedKey. On the way back in it must be
    exactly a key the same listing issues: the caller's own partition, for a listing by
    status that status's index key too, and for a filtered listing the digest of its filters
    (name, workflow, schedule). Anything else (another tenant's cursor, a cursor of
    another status, a forged or partial key) is a 400 on ``cursor``, never a read elsewhere
    or a refused query.
    """

    def encode(
        self, tenant_id: str, key: Mapping[str, Any], *, where: JobFilter = NO_FILTER
    ) -> str:
        digest = where.digest()
        bound = {**key, _FILTER: digest} if digest else dict(key)
        body = json.dumps(bound, separators=(",", ":"), sort_keys=True)
        return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")

    def decode(
        self,
        tenant_id: str,
        cursor: str,
        *,
        status: JobStatus | None = None,
        where: JobFilter = NO_FILTER,
    ) -> dict[str, Any]:
        key = self._parse(cursor)
        expected = {"pk": tenant_pk(tenant_id)}
        if status is not None:
            expected["status_pk"] = status_pk(tenant_id, status)
        digest = where.digest()
        if digest is not None:
            expected[_FILTER] = digest
        sk = key.get("sk")
        if (
            set(key) != {*expected, "sk"}
            or any(key[name] != value for name, value in expected.items())
            or not isinstance(sk, str)
            or not _JOB_SK.match(sk)
        ):
            raise _refused()
        expected.pop(_FILTER, None)
        return {**expected, "sk": job_sk(sk.removeprefix("JOB#"))}

    @staticmethod
    def _parse(cursor: str) -> dict[str, Any]:
        if len(cursor) > _MAX_CURSOR_CHARS:
            raise _refused()
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            key = json.loads(raw)
        except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
            raise _refused() from None
        if not isinstance(key, dict):
            raise _refused()
        return key


def _refused() -> InvalidRequest:
    return InvalidRequest("cursor is not one this API issued for this listing", field="cursor")
