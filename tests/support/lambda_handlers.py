"""A Lambda handler for testing the local Lambda service and gateway, by path:

``/echo``                       the event's method, path, body and the environment's pid
``/wait?started=F&release=G``   write F, then wait (within the timeout) until G exists
``/hang?pidfile=F``             write the pid to F, then never answer
``/crash``                      the process dies mid-invocation
``/raise``                      the handler raises
``/xray``                       the X-Ray SDK's sampler and whether Powertools would trace

Imported by ``python -m devstack.lambda_env tests.support.lambda_handlers:handler``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def _answer(status: int, payload: Any) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(payload),
    }


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    path = event["path"]
    query = event.get("queryStringParameters") or {}
    if path == "/wait":
        Path(query["started"]).write_text(str(os.getpid()))
        release = Path(query["release"])
        while not release.exists() and context.get_remaining_time_in_millis() > 0:
            time.sleep(0.01)
        return _answer(200, {"pid": os.getpid(), "released": release.exists()})
    if path == "/hang":
        Path(query["pidfile"]).write_text(str(os.getpid()))
        time.sleep(3600)
    if path == "/crash":
        os._exit(3)
    if path == "/raise":
        raise RuntimeError("handler failed")
    if path == "/xray":
        from aws_lambda_powertools import Tracer
        from aws_xray_sdk.core import xray_recorder

        return _answer(
            200,
            {
                "sampler": type(xray_recorder.sampler).__name__,
                "tracing": not Tracer(service="probe").disabled,
                "task_root": os.environ.get("LAMBDA_TASK_ROOT"),
            },
        )
    return _answer(
        200,
        {
            "pid": os.getpid(),
            "method": event["httpMethod"],
            "path": path,
            "body": event["body"],
            "isBase64Encoded": event["isBase64Encoded"],
            "function": os.environ.get("AWS_LAMBDA_FUNCTION_NAME"),
        },
    )
