"""The local stack's event sources: what invokes the functions besides the REST API.

On AWS: EventBridge ``rate(1 minute)`` invokes the sweeper, an SQS event source mapping
feeds each DLQ to dead_letters, a DynamoDB stream event source mapping feeds the jobs
table's stream to job_changes, and EventBridge Scheduler fires the scheduler function.
Locally a timer and pollers play those parts, invoking the same functions with the same
event shapes through the local Lambda service.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from devstack.constants import LOCAL_REGION
from devstack.counted_share import CountedShare
from devstack.iam.local import LocalIam
from devstack.lambda_env import Invoke, LambdaFunction, invoker
from devstack.pollers import Background, DeadLetterPoller, Timer, stop_together, sweeper_timer
from devstack.repeated_invocations import sometimes_twice
from devstack.scheduler import SchedulerPoller
from pagefleet.runtime import RUNTIME
from pagefleet.specs.resources import JOBS_STREAM_FILTERS

log = logging.getLogger("devstack")

# The event source mapping's batching window on AWS is 1 s; locally a shorter one keeps
# live updates snappy on an idle stack (both are "at most", not "at least").
STREAM_BATCHING_WINDOW_S = 0.25
STREAM_POLL_S = 0.1
# After a poll that found nothing, the next waits this long: an idle stack's reader made ten
# GetRecords a second, each a request the embedded AWS answers on the same cores as the jobs.
STREAM_IDLE_POLL_S = 0.25
STREAM_BATCH_SIZE = 100
STREAM_MAX_RETRIES = 10  # the event source mapping's MaximumRetryAttempts
STREAM_RETRY_DELAY_S = 1.0


class StreamMapping:
    """What Lambda's stream event source mapping does with the jobs stream, as configured by
    ``infra/constructs/job_changes.py``: only records a filter matches invoke the function;
    the function's ``batchItemFailures`` checkpoint the batch (the records before the
    named one are done, it and the rest are sent again); a batch that makes no progress (its
    first record failed, or the function raised) is split in two (bisect on error), until the
    failing record is alone; a record that still fails after ``max_retries`` goes to the
    failure destination, and the shard moves on.
    """

    def __init__(
        self,
        invoke: Callable[[dict[str, Any]], Any],
        stream_arn: str,
        *,
        filters: Sequence[dict[str, Any]] = JOBS_STREAM_FILTERS,
        max_retries: int = STREAM_MAX_RETRIES,
        retry_delay_s: float = STREAM_RETRY_DELAY_S,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        # moto's EventBridge pattern matcher: Lambda's event filters use the same language.
        from moto.events.models import EventPattern

        self._invoke = invoke
        self.stream_arn = stream_arn
        self._filters = [EventPattern(json.dumps(f), f) for f in filters]
        self.max_retries = max_retries
        self.retry_delay_s = retry_delay_s
        # Waits between retries; True means "stop" (the poller is shutting down).
        self._wait = wait or _sleep
        self.delivered = 0
        # What the failure destination received (AWS: an SQS message per discarded range).
        self.failed_batches: list[dict[str, Any]] = []

    def matches(self, record: dict[str, Any]) -> bool:
        """Whether ``record`` (as the function's event carries it) passes the filter."""
        return any(f.matches_event(cast(Any, record)) for f in self._filters)

    def process(self, batch: list[dict[str, Any]]) -> bool:
        """Deliver one batch (filtered records, in stream order); False if stopped."""
        pending: deque[list[dict[str, Any]]] = deque([batch])
        while pending:
            records, attempts = pending.popleft(), 0
            while records:
                failed_at = self._failed_at(records)
                if failed_at is None:
                    self.delivered += len(records)
                    break
                if failed_at > 0:  # a checkpoint: what came before it is done
                    self.delivered += failed_at
                    records = records[failed_at:]
                    continue
                if len(records) > 1:  # no progress: bisect (does not count as a retry)
                    half = len(records) // 2
                    pending.extendleft([records[half:], records[:half]])
                    break
                attempts += 1
                if attempts > self.max_retries:
                    self._discard(records, attempts)
                    break
                if self._wait(self.retry_delay_s):
                    return False
        return True

    def _failed_at(self, records: list[dict[str, Any]]) -> int | None:
        """The index of the first record the function failed; 0 if it failed them all."""
        try:
            answer = self._invoke({"Records": records})
        except Exception:
            log.exception("job_changes failed a batch of %s records", len(records))
            return 0
        failures = (answer or {}).get("batchItemFailures") or []
        if not failures:
            return None
        named = {str(f.get("itemIdentifier") or "") for f in failures}
        # The lowest named sequence number is the checkpoint; an unknown one fails the batch.
        found = [i for i, r in enumerate(records) if r["dynamodb"].get("SequenceNumber") in named]
        return min(found) if found else 0

    def _discard(self, records: list[dict[str, Any]], attempts: int) -> None:
        first, last = records[0], records[-1]
        failure = {
            "requestContext": {
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": attempts,
            },
            "version": "1.0",
            "timestamp": datetime.now(UTC).isoformat(),
            "DDBStreamBatchInfo": {
                "shardId": first.get("shardId", ""),
                "startSequenceNumber": first["dynamodb"].get("SequenceNumber"),
                "endSequenceNumber": last["dynamodb"].get("SequenceNumber"),
                "approximateArrivalOfFirstRecord": first["dynamodb"].get(
                    "ApproximateCreationDateTime"
                ),
                "approximateArrivalOfLastRecord": last["dynamodb"].get(
                    "ApproximateCreationDateTime"
                ),
                "batchSize": len(records),
                "streamArn": self.stream_arn,
            },
        }
        self.failed_batches.append(failure)
        log.error("job_changes: records sent to the failure destination: %s", failure)


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


class StreamPoller(Background):
    """The jobs table's stream -> job_changes, one shard at a time, in order, through the
    same filter, checkpoints and bisection as the event source mapping (``StreamMapping``)."""

    thread_name = "stream-poller"

    def __init__(
        self,
        table_name: str,
        function: LambdaFunction | Callable[..., Any],
        aws: Callable[[str], Any] | None = None,
    ) -> None:
        """``aws(service)`` makes the stream's client: the function's role on AWS."""
        self._table = table_name
        self._aws = aws
        self._invoke = invoker(function)
        self.mapping: StreamMapping | None = None
        self.ready = threading.Event()
        super().__init__()

    @property
    def delivered(self) -> int:
        return self.mapping.delivered if self.mapping else 0

    def _run(self) -> None:
        streams = (self._aws or RUNTIME.client)("dynamodbstreams")
        # The mapping's setup (the stream's ARN) is the operator's, as CloudFormation's.
        arn = RUNTIME.client("dynamodb").describe_table(TableName=self._table)["Table"][
            "LatestStreamArn"
        ]
        mapping = self.mapping = StreamMapping(self._invoke, arn, wait=self._stop.wait)
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
                    # Filtered out records never count towards a batch, as on AWS.
                    kept = [
                        r
                        for r in (lambda_record(r, arn) for r in resp.get("Records", []))
                        if mapping.matches(r)
                    ]
                    if kept and not pending:
                        first_seen = time.monotonic()
                    pending += kept
                due = pending and (
                    len(pending) >= STREAM_BATCH_SIZE
                    or time.monotonic() - first_seen >= STREAM_BATCHING_WINDOW_S
                )
                if due:
                    if not mapping.process(pending[:STREAM_BATCH_SIZE]):
                        break
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


def _as_lambda_sends(value: Any) -> Any:
    """An attribute value as the event's JSON carries it: binary as base64 text (boto3 has
    decoded it to bytes; a Lambda handler is given the text)."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _as_lambda_sends(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_lambda_sends(v) for v in value]
    return value


def lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A record of GetRecords as a DynamoDB stream event source mapping hands it over."""
    return {
        "eventID": record.get("eventID"),
        "eventName": record.get("eventName"),
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion", LOCAL_REGION),
        "dynamodb": {
            k: (v.timestamp() if hasattr(v, "timestamp") else _as_lambda_sends(v))
            for k, v in record["dynamodb"].items()
        },
        "eventSourceARN": stream_arn,
    }


def stream_event(records: list[dict[str, Any]], stream_arn: str) -> dict[str, Any]:
    """The Lambda event a DynamoDB stream event source mapping builds from records."""
    return {"Records": [lambda_record(r, stream_arn) for r in records]}


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
        iam: LocalIam | None = None,
        duplicate_share: float = 0.0,
    ) -> None:
        """With ``iam``, each source reads as AWS's would: an event source mapping with its
        function's role, the scheduler function's failed fires with its role. With
        ``duplicate_share``, that share of the stream's batches, the Scheduler's fires and the
        sweeper's ticks invoke their function twice, as Lambda may
        (``devstack.repeated_invocations``); ``invoked_twice`` counts them."""
        iam = iam or LocalIam.off()
        self.invoked_twice = CountedShare()

        def invoke(name: str) -> Invoke:
            return sometimes_twice(functions[name].invoke, duplicate_share, self.invoked_twice)

        self.sweeper: Timer = sweeper_timer(sweeper_interval_s, invoke("sweeper"))
        self.dead_letters = DeadLetterPoller(
            dlq_urls, function=functions["dead_letters"], aws=iam.clients("function/dead_letters")
        )
        self.stream = StreamPoller(
            jobs_table, invoke("job_changes"), aws=iam.clients("function/job_changes")
        )
        self._parts: list[Any] = [self.sweeper, self.dead_letters, self.stream]
        self.scheduler: SchedulerPoller | None = None
        if schedule_group is not None:
            self.scheduler = SchedulerPoller(
                schedule_group,
                invoke("scheduler"),
                dlq_url=scheduler_dlq_url,
                dead_letter_aws=iam.clients("function/scheduler"),
            )
            self._parts.append(self.scheduler)

    def start(self) -> EventSources:
        for part in self._parts:
            part.start()
        self.stream.ready.wait(10)
        return self

    def stop(self) -> None:
        stop_together(part.stop for part in self._parts)
