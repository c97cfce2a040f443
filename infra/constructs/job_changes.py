"""Job changes: the jobs table's stream feeds ``functions/job_changes``, its one reader.

DynamoDB Streams serves two readers a shard, so dependants' release, live delivery and
notifications share this function (each a consumer in ``pagefleet.jobs.changes``). Only job
records and run events invoke it (``JOBS_STREAM_FILTERS``). The function names the first
record that failed; the mapping retries from there, and bisects a batch that makes no
progress, so a bad record ends alone: after ``RETRY_ATTEMPTS`` its range goes to a DLQ
(alarmed) and the shard moves on; the sweeper catches what was missed.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

from infra import grants
from pagefleet.specs.resources import JOBS_STREAM_FILTERS
from pagefleet.specs.settings import ChangesSettings

from .alerts import Alerts
from .job_queues import JobQueues
from .job_store import JobStore
from .lambda_factory import LambdaFactory

TIMEOUT_S = 60
BATCH_SIZE = 100
# Live delivery promises a status within about a second of its write.
BATCHING_WINDOW_S = 1
RETRY_ATTEMPTS = 10


class JobChanges(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: LambdaFactory,
        store: JobStore,
        queues: JobQueues,
        alerts: Alerts,
        core_env: dict[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        self.function: lambda_.Function = functions.function(
            "job_changes",
            settings_cls=ChangesSettings,
            description="pagefleet: the jobs stream's one reader (dependants, live, notifications)",
            timeout_seconds=TIMEOUT_S,
            env=core_env,
        )
        # Stream-failure records (which shard range failed) for an operator to look at.
        self.dlq = alerts.dead_letter_queue(self, "FailedBatches", "JobChanges")
        grants.table(self.function, store.jobs, grants.JOBS_CHANGES)
        for q in queues.all:
            grants.queue(self.function, q.queue, grants.QUEUE_SEND)
        self.function.add_event_source(
            sources.DynamoEventSource(
                store.jobs,
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=BATCH_SIZE,
                max_batching_window=Duration.seconds(BATCHING_WINDOW_S),
                retry_attempts=RETRY_ATTEMPTS,
                report_batch_item_failures=True,
                bisect_batch_on_error=True,
                on_failure=sources.SqsDlq(self.dlq),
                filters=[lambda_.FilterCriteria.filter(f) for f in JOBS_STREAM_FILTERS],
            )
        )
