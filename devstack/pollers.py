"""Pollers that play AWS event sources on the local stack.

On AWS, EventBridge ``rate(1 minute)`` invokes the sweeper and an SQS event source mapping
feeds each DLQ to the dead_letters function. Locally a timer and a poller invoke the same
functions with the same event shapes: through the stack's Lambda service (each function in
its own execution environments, like the API), or, when none is given, in this process.
(The stream -> live poller joins here with that function.)
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Self

from devstack.constants import LOCAL_ACCOUNT, LOCAL_REGION
from devstack.lambda_env import Invoke, LambdaFunction, invoker
from devstack.provision import queue_arn
from pagefleet.runtime import RUNTIME

log = logging.getLogger("devstack")


def stop_together(stops: Iterable[Callable[[], object]]) -> None:
    """Call each stop on a thread of its own and wait for them all: parts that each wait out
    a long poll or a server's poll interval (0.3-0.7 s here) wait it out together, not one
    after another (every test module's stack stops once)."""

    def quietly(stop: Callable[[], object]) -> None:
        with contextlib.suppress(Exception):
            stop()

    threads = [threading.Thread(target=quietly, args=(stop,), daemon=True) for stop in stops]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class Background:
    """A part of the local stack that runs ``_run`` on a daemon thread until stopped."""

    thread_name = "background"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        raise NotImplementedError


class Timer(Background):
    """Calls ``action`` every ``interval_s`` on a daemon thread until stopped.

    A failing run is logged and the timer keeps going, as a scheduled Lambda would be
    invoked again on the next tick.
    """

    def __init__(self, name: str, interval_s: float, action: Callable[[], object]) -> None:
        self.name = name
        self.thread_name = f"timer-{name}"
        self.interval_s = interval_s
        self._action = action
        self.runs = 0
        self.failures = 0
        super().__init__()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._action()
                self.runs += 1
            except Exception:
                if self._stop.is_set():
                    break  # stopped mid-run: the stack closed the function under it
                self.failures += 1
                log.exception("timer %s failed", self.name)


def in_process(name: str, module: str) -> LambdaFunction:
    """``functions.<module>.handler`` run in this process (imported on the first call)."""

    def handler(event: dict[str, Any], context: Any) -> Any:
        target = importlib.import_module(f"functions.{module}.handler")
        return target.handler(event, context)

    return LambdaFunction(name, handler)


def sweeper_timer(
    interval_s: float = 60,
    function: LambdaFunction | Invoke | None = None,
) -> Timer:
    """EventBridge ``rate(1 minute)``: invoke the real sweeper with a scheduled event."""
    invoke = invoker(function or in_process("pagefleet-sweeper", "sweeper"))

    def tick() -> object:
        report = invoke(scheduled_event())
        if isinstance(report, dict) and any(report.values()):
            log.info("sweeper: %s", report)
        return report

    return Timer("sweeper", interval_s, tick)


def scheduled_event() -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": LOCAL_ACCOUNT,
        "time": now,
        "region": LOCAL_REGION,
        "resources": [f"arn:aws:events:{LOCAL_REGION}:{LOCAL_ACCOUNT}:rule/pagefleet-sweeper"],
        "detail": {},
    }


def sqs_event_records(messages: list[dict[str, Any]], arn: str) -> dict[str, Any]:
    """The Lambda SQS event an event source mapping builds from received messages."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {
                    name: {
                        "stringValue": attr.get("StringValue"),
                        "binaryValue": attr.get("BinaryValue"),
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": attr["DataType"],
                    }
                    for name, attr in m.get("MessageAttributes", {}).items()
                },
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": LOCAL_REGION,
            }
            for m in messages
        ]
    }


class DeadLetterPoller(Background):
    """The DLQ event source mapping: long-poll each DLQ, invoke dead_letters, delete what
    it handled (records named in ``batchItemFailures`` stay for another try)."""

    thread_name = "dlq-poller"

    def __init__(
        self,
        dlq_urls: dict[str, str],
        *,
        wait_s: int = 2,
        function: LambdaFunction | None = None,
        aws: Callable[[str], Any] | None = None,
    ) -> None:
        """``aws(service)`` makes the poller's clients: the function's role on AWS."""
        self._urls = dict(dlq_urls)
        self._aws = aws
        self._function = function or in_process("pagefleet-dead-letters", "dead_letters")
        self._wait = wait_s
        self.handled = 0
        super().__init__()

    def _run(self) -> None:
        def handler(event: dict[str, Any], context: Any) -> Any:
            return self._function.invoke(event)

        sqs = (self._aws or RUNTIME.client)("sqs")
        # Named from the URLs, not asked for: a queue made the moment before is not usable
        # for a second (devstack.strict_aws), and a call then, outside the loop's error
        # handling, ended the thread: the webhook queue was never read again.
        arns = {url: queue_arn(sqs, url) for url in self._urls.values()}
        while not self._stop.is_set():
            for url in self._urls.values():
                # Each long poll takes up to wait_s: six DLQs in a row outlasted stop()'s join.
                if self._stop.is_set():
                    break
                try:
                    self.poll_once(sqs, url, arns[url], handler)
                except Exception:
                    log.exception("dead-letter poller failed")
                    self._stop.wait(1)

    def poll_once(self, sqs: Any, url: str, arn: str, handler: Callable[..., Any]) -> int:
        resp = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=self._wait,
            VisibilityTimeout=30,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = resp.get("Messages", [])
        if not messages:
            return 0
        try:
            result = handler(sqs_event_records(messages, arn), None)
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        except Exception:
            if not self._stop.is_set():
                # The function's own name: this poller also reads the webhook queue.
                log.exception("%s failed the whole batch; it will be retried", self._function.name)
            return 0
        for m in messages:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
                self.handled += 1
        return len(messages) - len(failed)
