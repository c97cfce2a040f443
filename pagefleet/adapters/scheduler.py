"""Schedule records mirrored as EventBridge Scheduler schedules in the stage's group.

Each schedule targets the scheduler function with ``{tenant_id, schedule_id,
scheduled_time}``; the scheduled time is the Scheduler's own ``<aws.scheduler.scheduled-time>``
context attribute, so every retry of one fire carries the same time (the idempotency key).
A retry policy and a dead-letter queue on the target catch fires the function could not take.
A one-time (``at()``) schedule is deleted by the Scheduler after its fire
(``ActionAfterCompletion: DELETE``): it would otherwise stay, counting against the
account's schedule quota, for ever. Its record stays (``pagefleet.schedules``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from pagefleet.schedules.expressions import parse
from pagefleet.schedules.service import Schedule

SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
# A fire retried for up to a day, at most 185 times (the Scheduler's own maximum).
RETRY_POLICY = {"MaximumEventAgeInSeconds": 86_400, "MaximumRetryAttempts": 185}


def mirror_name(schedule_id: str) -> str:
    # Names are 1-64 of [0-9a-zA-Z-_.]; the id (a ULID) is unique across tenants.
    return f"pf-{schedule_id}"


def target_input(schedule: Schedule) -> str:
    return json.dumps(
        {
            "tenant_id": schedule.tenant_id,
            "schedule_id": schedule.schedule_id,
            "scheduled_time": SCHEDULED_TIME,
        },
        separators=(",", ":"),
    )


def after_completion(schedule: Schedule) -> str:
    """What the Scheduler does with the schedule after its last fire."""
    return "DELETE" if parse(schedule.expression, schedule.timezone).kind == "at" else "NONE"


@dataclass(frozen=True)
class SchedulerTarget:
    group: str
    function_arn: str
    role_arn: str
    dead_letter_arn: str | None = None


class EventBridgeSchedulerMirror:
    def __init__(self, client: Any, target: SchedulerTarget) -> None:
        self._client = client
        self._target = target

    def sync(self, schedule: Schedule) -> None:
        target: dict[str, Any] = {
            "Arn": self._target.function_arn,
            "RoleArn": self._target.role_arn,
            "Input": target_input(schedule),
            "RetryPolicy": RETRY_POLICY,
        }
        if self._target.dead_letter_arn:
            target["DeadLetterConfig"] = {"Arn": self._target.dead_letter_arn}
        params: dict[str, Any] = {
            "Name": mirror_name(schedule.schedule_id),
            "GroupName": self._target.group,
            "ScheduleExpression": schedule.expression,
            "ScheduleExpressionTimezone": schedule.timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED" if schedule.enabled else "DISABLED",
            "Target": target,
            "Description": f"pagefleet {schedule.tenant_id}: {schedule.name}"[:512],
            # UpdateSchedule replaces every setting: this is sent on updates too.
            "ActionAfterCompletion": after_completion(schedule),
        }
        try:
            self._client.update_schedule(**params)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            self._client.create_schedule(**params)

    def remove(self, schedule_id: str) -> None:
        try:
            self._client.delete_schedule(
                Name=mirror_name(schedule_id), GroupName=self._target.group
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
