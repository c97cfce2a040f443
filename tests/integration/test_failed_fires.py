"""A fire the scheduler function fails, as AWS handles it: the Scheduler invokes the function
asynchronously, so Lambda tries the fire again and then records it in the function's
on-failure destination (the alarmed DLQ), in Lambda's invocation-record shape. The local
Scheduler (``devstack.scheduler``) against the embedded Scheduler and SQS."""

from __future__ import annotations

import json
import time
from typing import Any

from devstack.fakes import FakeClock
from devstack.lambda_env.protocol import FunctionError
from devstack.provision import Provisioned
from devstack.scheduler import ATTEMPTS, SchedulerPoller
from pagefleet.adapters.scheduler import SCHEDULED_TIME
from pagefleet.runtime import RUNTIME
from pagefleet.specs.resources import SCHEDULER


def _schedule(env: Provisioned) -> None:
    settings = env.scheduler_settings()
    fire = {"tenant_id": "alice", "schedule_id": "s1", "scheduled_time": SCHEDULED_TIME}
    RUNTIME.client("scheduler").create_schedule(
        Name="hourly",
        GroupName=env.schedule_group,
        ScheduleExpression="rate(1 hour)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={
            "Arn": settings["scheduler_target_arn"],
            "RoleArn": settings["scheduler_role_arn"],
            "Input": json.dumps(fire),
        },
    )


def _fire_an_hour_later(env: Provisioned, function: Any) -> SchedulerPoller:
    clock = FakeClock(time.time())
    poller = SchedulerPoller(
        env.schedule_group, function, dlq_url=env.scheduler_dlq_url, clock=clock.now
    )
    clock.advance(3700)
    assert poller.tick() == 1
    return poller


def _recorded(env: Provisioned) -> list[dict[str, Any]]:
    answer = RUNTIME.client("sqs").receive_message(
        QueueUrl=env.scheduler_dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
    )
    return [json.loads(m["Body"]) for m in answer.get("Messages", [])]


def test_a_fire_the_function_fails_is_tried_again_then_recorded_as_lambda_records_it(
    api_env: Provisioned,
) -> None:
    _schedule(api_env)
    calls: list[dict[str, Any]] = []

    def failing(event: dict[str, Any]) -> None:
        calls.append(event)
        raise FunctionError("the store is busy", "StoreBusy")

    poller = _fire_an_hour_later(api_env, failing)
    assert len(calls) == ATTEMPTS == 1 + SCHEDULER.function_retries == 3
    assert poller.fired == []
    (record,) = _recorded(api_env)
    target = api_env.scheduler_settings()["scheduler_target_arn"]
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == ATTEMPTS
    assert record["requestContext"]["functionArn"].startswith(target)
    # The fire itself, its time filled in: what an operator reads to run it again.
    assert record["requestPayload"] == calls[0] and calls[0]["scheduled_time"] != SCHEDULED_TIME
    assert record["responseContext"]["functionError"] == "Unhandled"
    assert record["responsePayload"]["errorType"] == "StoreBusy"


def test_a_fire_failed_once_is_made_by_the_next_try_and_not_recorded(
    api_env: Provisioned,
) -> None:
    _schedule(api_env)
    calls: list[dict[str, Any]] = []

    def flaky(event: dict[str, Any]) -> dict[str, Any]:
        calls.append(event)
        if len(calls) == 1:
            raise FunctionError("throttled", "ThrottlingException")
        return {"job_id": "j1"}

    poller = _fire_an_hour_later(api_env, flaky)
    assert len(calls) == 2 and calls[0] == calls[1]
    assert [name for name, _ in poller.fired] == ["hourly"]
    assert _recorded(api_env) == []
