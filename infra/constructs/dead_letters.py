"""Dead letters: each pool's DLQ feeds ``functions/dead_letters``, which marks the job
``dead_lettered`` (with the reason) and keeps it for redrive."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

from infra import grants
from pagefleet.specs.settings import CoreSettings

from .job_queues import JobQueues
from .job_store import JobStore
from .lambda_factory import LambdaFactory, sqs_visibility_for

TIMEOUT_S = 30
BATCHING_WINDOW_S = 5
# Each DLQ's mapping invokes at most this many consumers at once (ScalingConfig): a
# function-wide reserved concurrency shared by the mappings is not seen by their pollers,
# which then throttle in a burst (docs/decisions.md, "Dead-letter mappings: each its own
# maximum concurrency"). 2 is Lambda's minimum: a dead letter is rare, marking it is quick.
MAX_CONCURRENCY_PER_DLQ = 2
# What each DLQ's visibility timeout must be for this consumer (JobQueues applies it).
DLQ_VISIBILITY_S = sqs_visibility_for(TIMEOUT_S, BATCHING_WINDOW_S)


class DeadLetters(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: LambdaFactory,
        store: JobStore,
        queues: JobQueues,
        core_env: dict[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = functions.function(
            "dead_letters",
            settings_cls=CoreSettings,
            description="pagefleet: mark jobs whose message reached a DLQ as dead_lettered",
            timeout_seconds=TIMEOUT_S,
            env=core_env,
        )
        grants.table(self.function, store.jobs, grants.JOBS_DEAD_LETTERS)
        for pool in queues.all:
            # The event source grants receive/delete/visibility on the DLQ itself. The
            # messages stay in the DLQ only until marked: redrive re-submits from the record.
            self.function.add_event_source(
                sources.SqsEventSource(
                    pool.dlq,
                    batch_size=10,
                    max_batching_window=Duration.seconds(BATCHING_WINDOW_S),
                    report_batch_item_failures=True,
                    max_concurrency=MAX_CONCURRENCY_PER_DLQ,
                )
            )
