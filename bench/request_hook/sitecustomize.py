"""Counts the AWS requests of the process it is loaded in (``bench/aws_requests.py``).

Python imports ``sitecustomize`` at start-up from the first directory on ``sys.path`` that
holds one: the bench puts this directory first on ``PYTHONPATH`` of the runtimes it counts
(the Lambda functions' environments and the workers), never of its own process, so the local
stack's own pollers stay out of the count. Every botocore session made afterwards gets an
``after-call`` handler (one per API call, errors included: a failed conditional write is a
request too) that appends one line per request to ``<PAGEFLEET_BENCH_AWS_LOG>/<pid>.tsv``:
epoch time, runtime, ``service.Operation``, the items a batch or transaction carried, and
the table or queue it is about, and the
function of ours that made it (outside the adapters).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

LOG_DIR = os.environ.get("PAGEFLEET_BENCH_AWS_LOG")
_BATCHED = ("TransactItems", "Entries", "RequestItems", "TransactStatements")


def _runtime() -> str:
    return os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or os.environ.get(
        "PAGEFLEET_WORKER_ID", "process"
    )


def _target(params: dict[str, Any]) -> str:
    """The table or queue a request is about (the report groups a runtime's requests by it)."""
    name = params.get("TableName") or str(params.get("QueueUrl", "")).rsplit("/", 1)[-1]
    if not name and isinstance(params.get("TransactItems"), list):
        tables = {next(iter(i.values())).get("TableName", "") for i in params["TransactItems"]}
        name = "+".join(sorted(tables))
    if not name and isinstance(params.get("RequestItems"), dict):  # BatchGetItem, BatchWriteItem
        name = "+".join(sorted(params["RequestItems"]))
    return str(name or params.get("Bucket", ""))


_OURS = tuple(f"{os.sep}{name}{os.sep}" for name in ("pagefleet", "browser_task", "functions"))
_ADAPTERS = f"{os.sep}pagefleet{os.sep}adapters{os.sep}"


def _caller() -> str:
    """The first function of ours outside the adapters on the stack: who wanted the call."""
    frame = sys._getframe(2)
    adapter = "?"  # a call made from a thread that starts in an adapter: name the adapter
    while frame is not None:
        name = frame.f_code.co_filename
        if any(part in name for part in _OURS):
            here = f"{frame.f_globals.get('__name__', '?')}.{frame.f_code.co_name}"
            if _ADAPTERS not in name:
                return here
            adapter = here
        frame = frame.f_back  # type: ignore[assignment]
    return adapter


def _items(params: dict[str, Any]) -> int:
    for key in _BATCHED:
        value = params.get(key)
        if isinstance(value, list):
            return len(value)
        if isinstance(value, dict):  # BatchWriteItem: {table: [requests]}
            return sum(len(v) for v in value.values())
    return 1


def _install(log_dir: str) -> None:
    import botocore.session

    lock = threading.Lock()
    path = os.path.join(log_dir, f"{os.getpid()}.tsv")
    runtime = _runtime()

    def before(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["bench_items"] = _items(params)
        context["bench_target"] = _target(params)
        context["bench_began"] = time.time()
        context["bench_waits"] = bool(params.get("WaitTimeSeconds"))

    def after(model: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        operation = f"{model.service_model.service_id.hyphenize()}.{model.name}"
        if model.name == "ReceiveMessage" and not parsed.get("Messages"):
            # A long poll that waited for nothing is idle capacity. A short poll that found
            # nothing is a slot asking for its next job (the high queue looked at beside the
            # normal one): a job's request, billed as one.
            operation += "(empty)" if context.get("bench_waits", True) else "(nothing)"
        if "Error" in parsed:
            operation += f"!{parsed['Error'].get('Code', '?')}"
        items, target = context.get("bench_items", 1), context.get("bench_target", "")
        write(operation, items, target, context.get("bench_began"), _caller())

    def write(operation: str, items: int, target: str, began: float | None, caller: str) -> None:
        now = time.time()
        took = f"{(now - began) * 1000:.3f}" if began is not None else ""
        fields = (f"{now:.6f}", runtime, operation, str(items), target, caller, took)
        line = "\t".join(fields) + "\n"
        with lock, open(path, "a") as out:
            out.write(line)

    made = botocore.session.Session.__init__

    def session_init(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self.register("before-parameter-build", before)
        self.register("after-call", after)

    botocore.session.Session.__init__ = session_init  # type: ignore[method-assign]
    if os.environ.get("PAGEFLEET_BENCH_PLAYWRIGHT"):
        _count_playwright(write)


def _count_playwright(write: Any) -> None:
    """Each call the Playwright client sends its driver (a round trip to Chromium's side),
    logged as ``playwright.<Type>.<method>`` with the time until its reply; fire-and-forget
    messages (``__waitInfo__``) too, with no time."""
    try:
        from playwright._impl.connection import Connection
    except ImportError:  # a runtime without Playwright (the Lambda functions)
        return
    sent = Connection.send_message_to_server

    def send(self: Any, obj: Any, method: str, params: Any, options: Any) -> Any:
        began = time.time()
        future = sent(self, obj, method, params, options)
        name, caller = f"playwright.{obj._type}.{method}", _caller()
        if future.done():
            write(name, 1, "", None, caller)
        else:
            future.add_done_callback(lambda _: write(name, 1, "", began, caller))
        return future

    Connection.send_message_to_server = send  # type: ignore[method-assign,assignment]


if LOG_DIR:
    _install(LOG_DIR)
