"""Workers' command inboxes in SQS (pagefleet.browsing.inbox): one queue per worker process.

AWS, CreateQueue: "After you create a queue, you must wait at least one second after the
queue is created to be able to use the queue". ``make`` is called once, when a worker
starts, and returns only after that second has passed and the queue answers: the worker
claims no session before, so nothing on a request's path ever meets a queue that young.
A queue's name is never made again after its deletion (a worker's id is its own), so
DeleteQueue's "wait at least 60 seconds before creating a queue with the same name" never
applies. Wake-ups are received hidden for ``HIDDEN_S`` and deleted in batches afterwards
(``delete``: ten a request), by the worker that handed them on: the command ledger, not the
queue, is what runs a command once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pagefleet.adapters.sqs import delete_together
from pagefleet.browsing.inbox import HIDDEN_S, INBOX_RETENTION_S, Delivery, InboxInfo, Wakeup
from pagefleet.jobs.ports import SQS_BATCH_MAX

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# AWS's wait after CreateQueue, and how long ``make`` tries before it gives up.
SETTLE_S = 1.0
MAKE_TIMEOUT_S = 30.0
PROBE_EVERY_S = 0.2
# A delete refused by SQS's side (throttled, an error of its own) is tried this many times.
DELETE_TRIES = 3
_GONE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")
log = logging.getLogger("pagefleet.session_inbox")


class InboxNotUsable(RuntimeError):
    """The inbox did not become usable in time: the worker takes no session."""


class SqsSessionInbox:
    def __init__(
        self,
        client: SQSClient,
        *,
        queue_url_base: str,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``queue_url_base``: the account's queue URL up to the name (``.../<account>/``)."""
        self._sqs = client
        self._base = queue_url_base if queue_url_base.endswith("/") else queue_url_base + "/"
        self._sleep = sleep
        self._clock = clock

    @classmethod
    def beside(cls, client: SQSClient, *, any_queue_url: str) -> SqsSessionInbox:
        """The inboxes of the account and region a known queue lives in."""
        return cls(client, queue_url_base=any_queue_url.rpartition("/")[0])

    def url(self, name: str) -> str:
        return self._base + name

    def make(self, name: str) -> None:
        self._sqs.create_queue(
            QueueName=name,
            Attributes={
                "MessageRetentionPeriod": str(INBOX_RETENTION_S),
                "SqsManagedSseEnabled": "true",
            },
        )
        made = self._clock()
        give_up = made + MAKE_TIMEOUT_S
        while True:
            left = made + SETTLE_S - self._clock()
            if left > 0:
                self._sleep(left)
            try:
                self._sqs.get_queue_attributes(QueueUrl=self.url(name), AttributeNames=["QueueArn"])
                return
            except Exception as exc:
                if not _gone(exc) or self._clock() > give_up:
                    raise InboxNotUsable(f"inbox {name} is not usable: {exc}") from exc
            self._sleep(PROBE_EVERY_S)

    def remove(self, name: str) -> None:
        try:
            self._sqs.delete_queue(QueueUrl=self.url(name))
        except Exception as exc:
            if not _gone(exc):
                raise

    def send(self, name: str, wakeup: Wakeup) -> bool:
        try:
            self._sqs.send_message(QueueUrl=self.url(name), MessageBody=wakeup.model_dump_json())
        except Exception as exc:
            if _gone(exc):
                return False
            raise
        return True

    def receive(self, name: str, *, wait_s: int, hidden_s: int = HIDDEN_S) -> list[Delivery]:
        resp = self._sqs.receive_message(
            QueueUrl=self.url(name),
            MaxNumberOfMessages=SQS_BATCH_MAX,
            WaitTimeSeconds=max(0, min(wait_s, 20)),
            # Explicit, not the queue's 30 s default (pagefleet.browsing.inbox.HIDDEN_S).
            VisibilityTimeout=hidden_s,
        )
        out: list[Delivery] = []
        for message in resp.get("Messages", []):
            try:
                wakeup: Wakeup | None = Wakeup.model_validate_json(message["Body"])
            except ValueError:
                log.warning("a message that is not a wake-up in inbox %s: deleted", name)
                wakeup = None
            out.append(Delivery(wakeup=wakeup, receipt=message["ReceiptHandle"]))
        return out

    def delete(self, name: str, receipts: list[str]) -> None:
        if len(receipts) > SQS_BATCH_MAX:
            raise ValueError(f"at most {SQS_BATCH_MAX} receipts a delete, not {len(receipts)}")
        pending = list(receipts)
        for attempt in range(DELETE_TRIES):
            if not pending:
                return
            try:
                refused = delete_together(self._sqs, self.url(name), pending)
            except Exception as exc:
                if _gone(exc):
                    return
                if attempt < DELETE_TRIES - 1:
                    continue
                log.warning("deleting wake-ups failed (their copies are harmless): %s", exc)
                return
            # Entries refused for their own fault (a stale receipt) are not tried again.
            pending = [handle for handle, sender in refused if not sender]
        if pending:
            log.warning("%d wake-ups not deleted (their copies are harmless)", len(pending))

    def listed(self, prefix: str) -> list[InboxInfo]:
        out: list[InboxInfo] = []
        kwargs: dict[str, object] = {"QueueNamePrefix": prefix, "MaxResults": 1000}
        while True:  # ListQueues answers at most 1,000 a call
            page = self._sqs.list_queues(**kwargs)  # type: ignore[arg-type]
            for url in page.get("QueueUrls", []):
                name = url.rpartition("/")[2]
                try:
                    attrs = self._sqs.get_queue_attributes(
                        QueueUrl=url, AttributeNames=["CreatedTimestamp"]
                    )["Attributes"]
                except Exception as exc:
                    if _gone(exc):
                        continue  # deleted meanwhile, or too young to answer
                    raise
                out.append(InboxInfo(name=name, created_at=float(attrs["CreatedTimestamp"])))
            token = page.get("NextToken")
            if not token:
                return out
            kwargs["NextToken"] = token


def _gone(exc: Exception) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
    return code in _GONE
