"""moto's SQS, made cheap where its cost grows with a queue's depth (``devstack.embedded_aws``).

moto answers several SQS calls by building every attribute of the queue, its approximate
counts included: each count is a pass over all the queue's messages, in flight and delayed
ones too, with a clock read per message. A queue holding a backlog (a burst of jobs, a
chaos run) made each such call slower with every message waiting, and the embedded AWS
serves all the stack's calls on one Python process. What those calls read is taken without
the counts, the answers unchanged:

- **Receives** check each message against the queue's retention period: read from the
  queue itself.
- **Sends** read the queue's ``ContentBasedDeduplication`` (a FIFO queue's attribute; a
  standard queue has none): a standard queue's send sees no attributes.
- **GetQueueAttributes** built every attribute up to three times per name asked for: once.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

_CALL = threading.local()  # what the SQS call running on this thread needs of its queue


def make_sqs_cheap() -> None:
    from moto.sqs.models import Queue, SQSBackend

    _cheap_retention_check(SQSBackend)
    every_attribute: Callable[[Any], dict[str, Any]] = Queue.attributes.fget  # type: ignore[attr-defined]

    def attributes(self: Any) -> dict[str, Any]:
        if getattr(_CALL, "sending", False) and not self.fifo_queue:
            return {}
        memo: dict[int, dict[str, Any]] | None = getattr(_CALL, "memo", None)
        if memo is None:
            return every_attribute(self)
        if id(self) not in memo:
            memo[id(self)] = every_attribute(self)
        return dict(memo[id(self)])

    Queue.attributes = property(attributes)  # type: ignore[method-assign,assignment]
    SQSBackend.send_message = _within(SQSBackend.send_message, "sending", True)  # type: ignore[method-assign]
    SQSBackend.get_queue_attributes = _within(  # type: ignore[method-assign]
        SQSBackend.get_queue_attributes, "memo", None, fresh=dict
    )


def _within(
    call: Callable[..., Any], name: str, value: Any, fresh: Callable[[], Any] | None = None
) -> Callable[..., Any]:
    """``call`` with ``_CALL.<name>`` set for its duration (``fresh()`` each time if given)."""

    @functools.wraps(call)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        before = getattr(_CALL, name, None)
        setattr(_CALL, name, fresh() if fresh is not None else value)
        try:
            return call(*args, **kwargs)
        finally:
            setattr(_CALL, name, before)

    return wrapped


def _cheap_retention_check(backend: Any) -> None:
    from moto.core.utils import unix_time

    def is_message_valid_based_on_retention_period(
        self: Any, queue_name: str, message: Any
    ) -> bool:
        period = int(self.get_queue(queue_name).message_retention_period)
        return bool(period + message.sent_timestamp / 1000 > unix_time())

    backend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period
