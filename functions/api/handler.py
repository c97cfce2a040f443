"""API Lambda entry point."""

from __future__ import annotations

import json
from typing import Any

from functions.api.app import api_settings, app, logger


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings = api_settings()  # validated on the first invocation (cold start)
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    logger.set_correlation_id(
        headers.get("x-correlation-id") or (event.get("requestContext") or {}).get("requestId")
    )
    body = event.get("body") or ""
    size = len(body.encode()) if isinstance(body, str) else len(body)
    if size > settings.max_request_bytes:
        # Refused before parsing: a huge body must not cost validation time.
        return {
            "statusCode": 413,
            "headers": {"Content-Type": "application/json"},
            "isBase64Encoded": False,
            "body": json.dumps(
                {
                    "error": {
                        "code": "request_too_large",
                        "message": f"request body exceeds {settings.max_request_bytes} bytes",
                        "field": "body",
                    }
                }
            ),
        }
    return app.resolve(event, context)
