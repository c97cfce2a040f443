"""A session's command and answer queues in SQS (pagefleet.browsing.channel).

AWS: "After you create a queue, you must wait at least one second after the queue is
created to be able to use the queue" (CreateQueue). A session's queues are made as it
opens and its job is queued at once, so its worker, and its first step, can reach them in
that second: SQS then answers that the queue does not exist. While a channel is younger
than ``SETTLE_S`` such an answer means "not usable yet", and the call is made again;
after, it means the session's queues were deleted (``ChannelGone``). A channel's name is a
ULID made the moment before its queues are created: its time is theirs.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from pagefleet.browsing.channel import ChannelGone, answer_fate
from pagefleet.browsing.models import MAX_DEADLINE_S, Answer, Command

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# A channel this young that SQS calls missing is still being made (AWS asks for 1 s; the
# rest covers the clocks of the API and the worker, which read the ULID's time).
SETTLE_S = 5.0
SETTLE_RETRY_S = 0.1
# A command or answer older than this is of no use to anyone (a step waits far less).
RETENTION_S = 900
# A received command stays hidden this long (the longest deadline a command may carry).
COMMAND_HIDDEN_S = MAX_DEADLINE_S
DELETE_TRIES = 3
log = logging.getLogger("pagefleet.session_channel")
_T = TypeVar("_T")
_GONE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")


class SqsSessionChannel:
    def __init__(self, client: SQSClient, *, prefix: str, queue_url_base: str) -> None:
        """``queue_url_base``: the account's queue URL up to the name (``.../<account>/``)."""
        self._sqs = client
        self._prefix = prefix
        self._base = queue_url_base if queue_url_base.endswith("/") else queue_url_base + "/"

    @classmethod
    def beside(cls, client: SQSClient, *, prefix: str, any_queue_url: str) -> SqsSessionChannel:
        """The channel of the account and region a known queue lives in."""
        return cls(client, prefix=prefix, queue_url_base=any_queue_url.rpartition("/")[0])

    def _name(self, channel: str, kind: str) -> str:
        return f"{self._prefix}{channel}-{kind}"

    def _url(self, channel: str, kind: str) -> str:
        return self._base + self._name(channel, kind)

    def open(self, channel: str) -> None:
        for kind in ("cmd", "ans"):
            self._sqs.create_queue(
                QueueName=self._name(channel, kind),
                Attributes={
                    "MessageRetentionPeriod": str(RETENTION_S),
                    "SqsManagedSseEnabled": "true",
                },
            )

    def close(self, channel: str) -> None:
        for kind in ("cmd", "ans"):
            url = self._url(channel, kind)
            with contextlib.suppress(ChannelGone):  # deleted already
                self._settled(channel, url, functools.partial(self._sqs.delete_queue, QueueUrl=url))

    def _settled(self, channel: str, url: str, call: Callable[[], _T]) -> _T:
        """``call()``, made again while the channel's queues are too young to be used;
        ``ChannelGone`` once SQS calls them missing past that."""
        while True:
            try:
                return call()
            except Exception as exc:
                if not _gone(exc):
                    raise
                if not settling(channel):
                    raise ChannelGone(url) from None
            time.sleep(SETTLE_RETRY_S)

    def send_command(self, channel: str, command: Command) -> None:
        self._send(channel, self._url(channel, "cmd"), command.model_dump_json())

    def send_answer(self, channel: str, answer: Answer) -> None:
        self._send(channel, self._url(channel, "ans"), answer.model_dump_json(exclude_none=True))

    def _send(self, channel: str, url: str, body: str) -> None:
        self._settled(channel, url, lambda: self._sqs.send_message(QueueUrl=url, MessageBody=body))

    def next_command(self, channel: str, *, wait_s: int) -> Command | None:
        url = self._url(channel, "cmd")
        resp = self._settled(
            channel,
            url,
            lambda: self._sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=1,
                WaitTimeSeconds=max(0, min(wait_s, 20)),
                # Explicit, not the queue's 30 s default: a command not deleted (the
                # worker died between receive and delete) is seen again only after any
                # deadline it could carry, and then answered expired by the ledger.
                VisibilityTimeout=COMMAND_HIDDEN_S,
            ),
        )
        for message in resp.get("Messages", []):
            # Deleted before it runs, and the delete waited for: a command a worker took
            # is never delivered again by this queue. A copy that comes anyway (SQS's
            # at-least-once delivery, a delete that failed) meets the command ledger's
            # claim, which runs a command once (pagefleet.browsing.commands).
            self._delete(url, message["ReceiptHandle"])
            return Command.model_validate_json(message["Body"])
        return None

    def _delete(self, url: str, handle: str) -> None:
        for attempt in range(DELETE_TRIES):
            try:
                self._sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
                return
            except Exception as exc:  # the queue went with its session: nothing to delete
                if _gone(exc):
                    return
                if attempt == DELETE_TRIES - 1:
                    log.warning("deleting a session message failed (its copy is harmless): %s", exc)

    def await_answer(self, channel: str, command_id: str, *, timeout_s: float) -> Answer | None:
        url = self._url(channel, "ans")
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                resp = self._sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=max(1, min(int(left), 20)),
                    # Hidden for as long as it is kept: one taken is never seen again, and
                    # its deletion (a call on the caller's path) is not needed.
                    VisibilityTimeout=RETENTION_S,
                )
            except Exception as exc:
                if not _gone(exc):
                    raise
                if not settling(channel):
                    raise ChannelGone(url) from None
                time.sleep(min(SETTLE_RETRY_S, max(0.0, left)))
                continue
            found: Answer | None = None
            for message in resp.get("Messages", []):
                answer = Answer.model_validate_json(message["Body"])
                fate = answer_fate(answer.id, command_id)
                handle = message["ReceiptHandle"]
                if fate == "release":
                    self._sqs.change_message_visibility(
                        QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0
                    )
                    continue
                if fate == "take":
                    found = answer
                else:
                    self._delete(url, handle)
            if found is not None:
                return found
        return None


def settling(channel: str, now: float | None = None) -> bool:
    """Whether the channel's queues may still be too young to use (see the docstring)."""
    from ulid import ULID

    try:
        made = ULID.from_str(channel.upper()).timestamp
    except ValueError:
        return False  # not a channel this adapter named
    return (time.time() if now is None else now) - made < SETTLE_S


def _gone(exc: Exception) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
    return code in _GONE
