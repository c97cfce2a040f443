"""Inside an execution environment: Lambda's Python runtime, reduced to what we use.

    python -m devstack.lambda_env functions.api.handler:handler --fd 3

Imports the handler once (the init phase; a module-level error fails the environment as
Lambda's Runtime.ImportModuleError does), then runs one invocation at a time for as long as
the service keeps the socket open, keeping module globals warm between them. The handler's
stdout and stderr go to the function's log file, with Lambda's START / END / REPORT lines.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from devstack.lambda_env.protocol import (
    MAX_PAYLOAD_BYTES,
    LambdaContext,
    encode,
    recv_frame,
    send_encoded,
    send_frame,
)

Handler = Callable[[Any, Any], Any]


def load_handler(target: str) -> Handler:
    module_name, _, attr = target.partition(":")
    handler = getattr(importlib.import_module(module_name), attr or "handler")
    if not callable(handler):
        raise TypeError(f"{target} is not callable")
    return handler


def _error(exc: BaseException, error_type: str | None = None) -> dict[str, Any]:
    return {"errorType": error_type or type(exc).__name__, "errorMessage": str(exc)}


def _log(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def serve(sock: socket.socket, target: str) -> int:
    started = time.monotonic()
    try:
        handler = load_handler(target)
    except BaseException as exc:
        traceback.print_exc()
        send_frame(sock, {"init_error": _error(exc, "Runtime.ImportModuleError")})
        return 1
    init_ms = (time.monotonic() - started) * 1000
    send_frame(sock, {"ready": os.getpid()})
    while True:
        try:
            message = recv_frame(sock)
        except EOFError:
            return 0  # the service closed us: the environment is being shut down
        context = LambdaContext.from_wire(message["context"])
        request_id = context.aws_request_id
        _log(f"START RequestId: {request_id} Version: $LATEST")
        begun = time.monotonic()
        reply: dict[str, Any]
        try:
            reply = {"result": handler(message["event"], context)}
        except Exception as exc:
            # Lambda logs an unhandled error with its traceback, then reports it.
            traceback.print_exc()
            reply = {"error": _error(exc)}
        took_ms = (time.monotonic() - begun) * 1000
        _log(f"END RequestId: {request_id}")
        report = f"REPORT RequestId: {request_id}\tDuration: {took_ms:.2f} ms"
        if init_ms:
            report += f"\tInit Duration: {init_ms:.2f} ms"
            init_ms = 0.0
        _log(report)
        try:
            data = encode(reply)
        except (TypeError, ValueError) as exc:  # not JSON: Lambda cannot return it either
            data = encode({"error": _error(exc, "Runtime.MarshalError")})
        if len(data) > MAX_PAYLOAD_BYTES:
            too_large = f"Response payload size ({len(data)} bytes) exceeded maximum allowed"
            data = encode(
                {"error": {"errorType": "Function.ResponseSizeTooLarge", "errorMessage": too_large}}
            )
        send_encoded(sock, data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.lambda_env")
    parser.add_argument("handler", help="module:function")
    parser.add_argument("--fd", type=int, required=True, help="socket to the Lambda service")
    args = parser.parse_args(argv)
    # Lambda's runtime gives the root logger a handler: library warnings reach the log.
    logging.basicConfig(
        level=logging.WARNING, format="[%(levelname)s]\t%(asctime)s\t%(name)s\t%(message)s"
    )
    sock = socket.socket(fileno=args.fd)
    try:
        return serve(sock, args.handler)
    finally:
        sock.close()
