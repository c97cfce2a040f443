"""The local stack's event sources: what invokes the functions besides the REST API.

On AWS: EventBridge ``rate(1 minute)`` invokes the sweeper, an SQS event source mapping
feeds each DLQ to dead_letters, a DynamoDB stream event source mapping feeds the jobs
table's stream to job_changes, and EventBridge Scheduler fires the scheduler function.
Locally a timer and pollers play those parts, invoking the same functions with the same
event shapes through the local Lambda service.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from devstack.constants import LOCAL_REGION
from devstack.lambda_env import LambdaFunction
from devstack.pollers import Background, DeadLetterPoller, Timer, sweeper_timer
from devstack.scheduler import SchedulerPoller
from pagefleet.runtime import RUNTIME

log = logging.getLogger("devstack")

# The event source mapping's batching window on AWS is 1 s; locally a shorter one keeps
# live updates snappy on an idle stack (both are "at most", not "at least").
STREAM_BATCHING_WINDOW_S = 0.25
STREAM_POLL_S = 0.1
# After a poll that found nothing, the next waits this long: an idle stack's reader made ten
# GetRecords a second, each a request the embedded AWS answers on the same cores as the jobs.
STREAM_IDLE_POLL_S = 0.25
STREAM_BATCH_SIZE = 100
STREAM_MAX_RETRIES = 10


class StreamPoller(Background):
    """The jobs table's stream -> job_changes, one shard at a time, in order.

    A batch the function reports failed (``batchItemFailures``) is sent again from the named
    record, up to ``STREAM_MAX_RETRIES`` times, as the event source mapping does.
    """

    thread_name = "stream-poller"

    def __init__(self, table_name: str, function: LambdaFunction | Callable[..., Any]) -> None:
        self._table = table_name
        self._invoke = function.invoke if isinstance(function, LambdaFunction) else function
        self.ready = threading.Event()
        super().__init__()

    def _run(self) -> None:
        streams = RUNTIME.client("dynamodbstreams")
        arn = RUNTIME.client("dynamodb").describe_table(TableName=self._table)["Table"][
            "LatestStreamArn"
        ]
        iterators: dict[str, str] = {}
        pending: list[dict[str, Any]] = []
        first_seen = 0.0
        self.ready.set()
        while not self._stop.is_set():
            found = False
            try:
                if not iterators:
                    iterators = self._iterators(streams, arn)
                for shard, iterator in list(iterators.items()):
                    resp = streams.get_records(ShardIterator=iterator, Limit=STREAM_BATCH_SIZE)
                    iterators[shard] = resp["NextShardIterator"]
                    found = found or bool(resp.get("Records"))
                    if resp.get("Records") and not pending:
                        first_seen = time.monotonic()
                    pending += resp.get("Records", [])
                due = pending and (
                    len(pending) >= STREAM_BATCH_SIZE
                    or time.monotonic() - first_seen >= STREAM_BATCHING_WINDOW_S
                )
                if due:
                    self._deliver(pending[:STREAM_BATCH_SIZE], arn)
                    pending = pending[STREAM_BATCH_SIZE:]
                    first_seen = time.monotonic()
            except Exception:
                if self._stop.is_set():
                    break
                log.exception("stream poller failed")
                self._stop.wait(1)
            self._stop.wait(STREAM_POLL_S if found or pending else STREAM_IDLE_POLL_S)

    def _iterators(self, streams: Any, arn: str) -> dict[str, str]:
        shards = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        return {
            s["ShardId"]: streams.get_shard_iterator(
                StreamArn=arn, ShardId=s["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for s in shards
        }

    def _deliver(self, records: list[dict[str, Any]], arn: str) -> None:
        batch = records
        for _ in range(STREAM_MAX_RETRIES):
            if self._stop.is_set():
                return
            result = self._invoke(stream_event(batch, arn))
            failures = (result or {}).get("batchItemFailures") or []
            if not failures:
                return
            first = str(failures[0].get("itemIdentifier"))
            at = next(
                (i for i, r in enumerate(batch) if r["dynamodb"].get("SequenceNumber") == first),
                0,
            )
            batch = batch[at:]
            self._stop.wait(1)
        log.error("job_changes failed a batch %s times; dropping it", STREAM_MAX_RETRIES)


def stream_event(records: list[dict[str, Any]], stream_arn: str) -> dict[str, Any]:
    """The Lambda event a DynamoDB stream event source mapping builds from records."""
    return {
        "Records": [
            {
                "eventID": r.get("eventID"),
                "eventName": r.get("eventName"),
                "eventVersion": r.get("eventVersion", "1.1"),
                "eventSource": "aws:dynamodb",
                "awsRegion": r.get("awsRegion", LOCAL_REGION),
                "dynamodb": {
                    k: (v.timestamp() if hasattr(v, "timestamp") else v)
                    for k, v in r["dynamodb"].items()
                },
                "eventSourceARN": stream_arn,
            }
            for r in records
        ]
    }


class EventSources:
    """Starts and stops every local event source of a stack."""

    def __init__(
        self,
        functions: dict[str, LambdaFunction],
        *,
        jobs_table: str,
        dlq_urls: dict[str, str],
        sweeper_interval_s: float,
        schedule_group: str | None = None,
        scheduler_dlq_url: str | None = None,
    ) -> None:
        self.sweeper: Timer = sweeper_timer(sweeper_interval_s, functions["sweeper"])
        self.dead_letters = DeadLetterPoller(dlq_urls, function=functions["dead_letters"])
        self.stream = StreamPoller(jobs_table, functions["job_changes"])
        self._parts: list[Any] = [self.sweeper, self.dead_letters, self.stream]
        self.scheduler: SchedulerPoller | None = None
        if schedule_group is not None:
            self.scheduler = SchedulerPoller(
                schedule_group, functions["scheduler"], dlq_url=scheduler_dlq_url
            )
            self._parts.append(self.scheduler)

    def start(self) -> EventSources:
        for part in self._parts:
            part.start()
        self.stream.ready.wait(10)
        return self

    def stop(self) -> None:
        for part in self._parts:
            with contextlib.suppress(Exception):
                part.stop()
