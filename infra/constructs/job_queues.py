"""Job queues: per worker pool one SQS queue per priority, each with its DLQ and an age alarm.

Built for the stage's pools from ``pagefleet.specs.resources.pool_queues``: the visibility
timeout (how long a received message waits for its claim), the redrive's maxReceiveCount
and the retention periods come from the same spec the local stack uses. A job's message is
deleted once it is claimed, so a queue holds only jobs that wait: its age alarm never fires
for a long job that runs. The DLQs' alarms are the alarms construct's, like every other
DLQ's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from pagefleet.specs.resources import QueueSpec, queues_of

from .alerts import Alerts


@dataclass(frozen=True)
class PriorityQueue:
    spec: QueueSpec
    queue: sqs.Queue
    dlq: sqs.Queue

    @property
    def key(self) -> str:
        return self.spec.key


@dataclass(frozen=True)
class PoolQueue:
    """A worker pool's queues, highest priority first (the workers take them in order)."""

    name: str
    by_priority: tuple[PriorityQueue, ...]

    @property
    def pool(self) -> str:
        return self.name

    @property
    def queues(self) -> list[sqs.Queue]:
        return [q.queue for q in self.by_priority]


class JobQueues(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pools: Iterable[str],
        alerts: Alerts,
        oldest_age_alarm_seconds: int,
        dlq_visibility_timeout_s: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.all: list[PriorityQueue] = []
        self.alarms: list[cloudwatch.Alarm] = []
        for spec in queues_of(pools):
            # The normal queue keeps the pool's original ids (deployed stacks keep it); the
            # ids come from the pool's name only, so adding a pool leaves the others' alone.
            pool_id = "".join(p.capitalize() for p in spec.key.split("-"))
            if spec.priority != "normal":
                pool_id = spec.pool.capitalize() + spec.priority.capitalize()
            dlq = sqs.Queue(
                self,
                f"{pool_id}DeadLetters",
                retention_period=Duration.seconds(spec.dlq_retention_s),
                # The DLQ's consumer is functions/dead_letters: its timeout sets this.
                visibility_timeout=Duration.seconds(dlq_visibility_timeout_s),
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
            )
            queue = sqs.Queue(
                self,
                f"{pool_id}Jobs",
                visibility_timeout=Duration.seconds(spec.visibility_timeout_s),
                retention_period=Duration.seconds(spec.retention_s),
                receive_message_wait_time=Duration.seconds(spec.receive_wait_s),
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                dead_letter_queue=sqs.DeadLetterQueue(
                    queue=dlq, max_receive_count=spec.max_receive_count
                ),
            )
            self.all.append(PriorityQueue(spec, queue, dlq))

            age_alarm = alerts.notify(
                cloudwatch.Alarm(
                    self,
                    f"{pool_id}OldestAgeAlarm",
                    alarm_description=(
                        f"The oldest waiting job of queue {spec.key} has waited more than "
                        f"{oldest_age_alarm_seconds} s to start (running jobs do not count): "
                        "workers are not keeping up"
                    ),
                    metric=queue.metric_approximate_age_of_oldest_message(
                        period=Duration.minutes(1), statistic="Maximum"
                    ),
                    threshold=oldest_age_alarm_seconds,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    evaluation_periods=5,
                    datapoints_to_alarm=3,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                ),
                runbook="queue-oldest-age",
            )
            self.alarms.append(age_alarm)

        self.pools: dict[str, PoolQueue] = {
            pool: PoolQueue(pool, tuple(q for q in self.all if q.spec.pool == pool))
            for pool in dict.fromkeys(q.spec.pool for q in self.all)
        }

    def queue_urls(self) -> dict[str, str]:
        """Queue key (``standard``, ``standard-high``...) -> URL: the tasks'
        PAGEFLEET_QUEUE_URLS."""
        return {q.key: q.queue.queue_url for q in self.all}

    def queue_names(self) -> dict[str, str]:
        """Queue key -> name: the functions' PAGEFLEET_QUEUE_URLS, beside
        ``QUEUE_URL_PREFIX`` (a function's environment holds 4 KB: infra/function_env.py)."""
        return {q.key: q.queue.queue_name for q in self.all}


# Every queue's URL is this and its name ("https://sqs.us-east-2.amazonaws.com/123456789012/
# MyQueue": SQS's "Queue and message identifiers"; the China partition's suffix included).
QUEUE_URL_PREFIX = f"https://sqs.{Aws.REGION}.{Aws.URL_SUFFIX}/{Aws.ACCOUNT_ID}/"
