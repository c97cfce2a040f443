"""The local stack's EventBridge Scheduler: moto stores schedules but never fires them.

Each tick reads the schedule group's schedules from the embedded Scheduler API, computes
their fire times with the same evaluator the API uses for ``next_fire_times``
(``pagefleet.schedules.expressions``), and invokes the real scheduler function with the target's
input, ``<aws.scheduler.scheduled-time>`` filled in, as the Scheduler does. The Scheduler
invokes a Lambda function asynchronously ("EventBridge Scheduler invokes your Lambda function
asynchronously", https://docs.aws.amazon.com/lambda/latest/dg/with-eventbridge-scheduler.html):
its own retry policy and DLQ are for handing the fire over, which locally always succeeds. A
fire the function fails is Lambda's: tried ``ATTEMPTS`` times in all (the function's
``MaximumRetryAttempts``, ``SCHEDULER.function_retries``, after the first), then an
invocation record of it, as Lambda sends an on-failure destination, goes to the function's
destination (the same DLQ), sent with the function's role. A one-time schedule with
``ActionAfterCompletion: DELETE`` is deleted after its fire.

The clock is injectable: tests call ``tick(now)`` with the time they want, instead of
waiting for a minute to pass.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from devstack.lambda_env import Invoke, LambdaFunction, invoker
from devstack.pollers import Background
from pagefleet.adapters.scheduler import SCHEDULED_TIME
from pagefleet.runtime import RUNTIME
from pagefleet.schedules.expressions import InvalidExpression, parse
from pagefleet.specs.resources import SCHEDULER

log = logging.getLogger("devstack")

TICK_S = 1.0
# Lambda's tries of an asynchronous invocation the function fails: the first and its retries.
ATTEMPTS = 1 + SCHEDULER.function_retries


class SchedulerPoller(Background):
    thread_name = "scheduler"

    def __init__(
        self,
        group: str,
        function: LambdaFunction | Invoke,
        *,
        dlq_url: str | None = None,
        clock: Callable[[], float] = time.time,
        tick_s: float = TICK_S,
        dead_letter_aws: Callable[[str], Any] | None = None,
    ) -> None:
        """``dead_letter_aws(service)``: the clients that record a failed fire in ``dlq_url``
        (on AWS, Lambda sends it with the function's role)."""
        self._group = group
        self._dead_letter_aws = dead_letter_aws
        self._invoke = invoker(function)
        self._dlq_url = dlq_url
        self._clock = clock
        self._tick_s = tick_s
        self._started = datetime.fromtimestamp(clock(), UTC)
        # Per schedule: the last time it fired (or the poller's start), so no fire repeats.
        self._fired_up_to: dict[str, datetime] = {}
        self._lock = threading.Lock()
        self.fired: list[tuple[str, str]] = []  # (schedule name, scheduled time)
        super().__init__()

    def _run(self) -> None:
        while not self._stop.wait(self._tick_s):
            try:
                self.tick()
            except Exception:
                if self._stop.is_set():
                    break
                log.exception("scheduler tick failed")

    def tick(self, now: datetime | None = None) -> int:
        """Fire every schedule due up to ``now`` (default: the clock). Returns the fires."""
        now = now or datetime.fromtimestamp(self._clock(), UTC)
        client = RUNTIME.client("scheduler")
        fired = 0
        with self._lock:
            names = self._names(client)
            for name in names:
                schedule = client.get_schedule(Name=name, GroupName=self._group)
                done = self._fire_due(schedule, now)
                fired += done
                if done and _completed(schedule):
                    client.delete_schedule(Name=name, GroupName=self._group)
            for gone in set(self._fired_up_to) - set(names):
                del self._fired_up_to[gone]
        return fired

    def _names(self, client: Any) -> list[str]:
        names: list[str] = []
        kwargs: dict[str, Any] = {"GroupName": self._group}
        while True:
            resp = client.list_schedules(**kwargs)
            names += [s["Name"] for s in resp.get("Schedules", [])]
            if not resp.get("NextToken"):
                return names
            kwargs["NextToken"] = resp["NextToken"]

    def _fire_due(self, schedule: dict[str, Any], now: datetime) -> int:
        name = schedule["Name"]
        created = schedule.get("CreationDate") or self._started
        created = created.astimezone(UTC) if isinstance(created, datetime) else self._started
        since = self._fired_up_to.setdefault(name, max(self._started, created))
        if schedule.get("State") != "ENABLED":
            self._fired_up_to[name] = max(since, now)  # a paused schedule skips, not catches up
            return 0
        try:
            expr = parse(
                schedule["ScheduleExpression"], schedule.get("ScheduleExpressionTimezone") or "UTC"
            )
        except InvalidExpression:
            log.warning("schedule %s: unusable expression", name)
            return 0
        count = 0
        for when in expr.fire_times(since, anchor=created):
            if when > now:
                break
            self._deliver(schedule, when)
            self._fired_up_to[name] = when
            count += 1
        return count

    def _deliver(self, schedule: dict[str, Any], when: datetime) -> None:
        stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        text = schedule["Target"].get("Input") or "{}"
        event = json.loads(text.replace(SCHEDULED_TIME, stamp))
        failure: Exception | None = None
        for attempt in range(ATTEMPTS):
            try:
                self._invoke(event)
                self.fired.append((schedule["Name"], stamp))
                return
            except Exception as exc:
                failure = exc
                log.exception("the scheduler function failed a fire (attempt %s)", attempt + 1)
        self._record_failure(schedule["Target"].get("Arn", ""), event, failure)

    def _record_failure(self, function_arn: str, event: Any, failure: Exception | None) -> None:
        """What Lambda sends an asynchronous invocation's on-failure destination once its
        retries are exhausted (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html)."""
        if self._dlq_url is None:
            return
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        record = {
            "version": "1.0",
            "timestamp": now,
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": f"{function_arn}:$LATEST",
                "condition": "RetriesExhausted",
                "approximateInvokeCount": ATTEMPTS,
            },
            "requestPayload": event,
            "responseContext": {
                "statusCode": 200,
                "executedVersion": "$LATEST",
                "functionError": "Unhandled",
            },
            "responsePayload": {
                "errorMessage": str(failure),
                "errorType": getattr(failure, "error_type", type(failure).__name__),
            },
        }
        (self._dead_letter_aws or RUNTIME.client)("sqs").send_message(
            QueueUrl=self._dlq_url, MessageBody=json.dumps(record)
        )


def _completed(schedule: dict[str, Any]) -> bool:
    """A one-time schedule that asked to be deleted after its (now made) fire."""
    one_time = str(schedule.get("ScheduleExpression", "")).startswith("at(")
    return one_time and schedule.get("ActionAfterCompletion") == "DELETE"
