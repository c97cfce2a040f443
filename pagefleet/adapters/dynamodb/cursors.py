"""Opaque pagination cursors bound to their tenant."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from pagefleet.adapters.dynamodb.codec import tenant_pk
from pagefleet.errors import InvalidRequest


class CursorCodec:
    """Opaque pagination cursors bound to their tenant.

    A cursor is the base64 of DynamoDB's LastEvaluatedKey; on the way back in it must name
    the caller's own partition, so a cursor can never start a read in another tenant's data.
    """

    _KEYS = frozenset({"pk", "sk", "status_pk"})

    def encode(self, tenant_id: str, key: Mapping[str, Any]) -> str:
        body = json.dumps(dict(key), separators=(",", ":"), sort_keys=True)
        return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")

    def decode(self, tenant_id: str, cursor: str) -> dict[str, Any]:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            key = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidRequest("cursor is not one this API issued", field="cursor") from exc
        if (
            not isinstance(key, dict)
            or not key
            or not set(key) <= self._KEYS
            or not all(isinstance(v, str) for v in key.values())
            or key.get("pk", tenant_pk(tenant_id)) != tenant_pk(tenant_id)
            or not key.get("status_pk", f"{tenant_id}#").startswith(f"{tenant_id}#")
        ):
            raise InvalidRequest("cursor is not one this API issued", field="cursor")
        return key
