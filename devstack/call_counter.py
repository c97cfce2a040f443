"""Counts the embedded AWS's calls by operation, with the CPU time each answer took: what
``bench/e2e_throughput.py`` reads to say where a job's AWS requests and moto's time go."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

COUNTS_PATH = "/_pagefleet/calls"
COUNT_ENV = "PAGEFLEET_COUNT_AWS_CALLS"
_WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _operation(environ: dict[str, Any], body: bytes) -> str:
    """The call's name: ``Service.Operation`` (and the table, for DynamoDB), or S3's verb."""
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target:
        service, _, action = target.partition(".")
        name = f"{service.split('_')[0]}.{action}"
        if service.startswith("DynamoDB_"):
            try:
                table = json.loads(body or b"{}").get("TableName")
            except ValueError:
                table = None
            if table:
                name += f" {table}"
        return name
    if body and b"Action=" in body:
        fields = dict(pair.split("=", 1) for pair in body.decode().split("&") if "=" in pair)
        return f"query.{fields.get('Action', '?')}"
    return f"s3.{environ.get('REQUEST_METHOD', '?')}"


class CallCounter:
    """Counts each call and the thread CPU time its answer took (a profiling aid)."""

    def __init__(self, app: _WsgiApp) -> None:
        self._app = app
        self._lock = threading.Lock()
        self.calls: dict[str, list[float]] = {}

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") == COUNTS_PATH:
            with self._lock:
                body = json.dumps(self.calls).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        size = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(size) if size else b""
        environ["wsgi.input"] = io.BytesIO(body)
        name = _operation(environ, body)
        started = time.thread_time()
        answer = list(self._app(environ, start_response))
        spent = time.thread_time() - started
        with self._lock:
            entry = self.calls.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += spent
        return answer
