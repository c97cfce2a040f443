"""Lambda invokes some events twice, as AWS may: the local event sources' rule.

AWS, of the event source mappings (the jobs stream's to job_changes, the queues' to
dead_letters and webhooks): "Lambda event source mappings process each event at least once,
and duplicate processing of records can occur"
(https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventsourcemapping.html); of
asynchronous invocation (EventBridge's ``rate(1 minute)`` rule to the sweeper, EventBridge
Scheduler to the scheduler function): "Even if your function doesn't return an error, it's
possible for it to receive the same event from Lambda multiple times because the queue
itself is eventually consistent"
(https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html).

The local event sources invoked each event once, so the functions' claim to be idempotent
(a schedule's fire submits one job, a stream batch notifies once, posts each event once to a
follower who keeps it once) was never put to them here. With
``invocation_duplicate_share`` set (``devstack.strict_aws``), that share of the stream
mapping's batches, the Scheduler's fires and the sweeper's ticks are invoked twice: the same
event again as soon as the first returns, and the second's answer is the one the source acts
on, as when the first's answer was lost and the source sent the event again. AWS's copies
may also overlap; the functions' guards are conditional writes, which the contract suite
holds under concurrency. The queues' mappings need nothing here: the queues' own duplicates
(``sqs_duplicate_share``) reach them. Counted, not drawn (``CountedShare``), so runs repeat.
"""

from __future__ import annotations

from typing import Any

from devstack.counted_share import CountedShare
from devstack.lambda_env import Invoke


def sometimes_twice(invoke: Invoke, share: float, counted: CountedShare) -> Invoke:
    """``invoke``, made twice for ``share`` of the events it is given (counted in
    ``counted``); a first invocation that raised is not made again here (the source retries
    it as its own rules say)."""
    if share <= 0:
        return invoke

    def delivered(event: dict[str, Any]) -> Any:
        answer = invoke(event)
        if counted.next(share):
            return invoke(event)
        return answer

    return delivered
