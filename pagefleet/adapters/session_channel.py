"""A session's command and answer queues in SQS (pagefleet.browsing.channel)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from pagefleet.browsing.channel import ChannelGone, answer_fate
from pagefleet.browsing.models import MAX_DEADLINE_S, Answer, Command

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# A command or answer older than this is of no use to anyone (a step waits far less).
RETENTION_S = 900
# A received command stays hidden this long (the longest deadline a command may carry).
COMMAND_HIDDEN_S = MAX_DEADLINE_S
DELETE_TRIES = 3
log = logging.getLogger("pagefleet.session_channel")
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
            try:
                self._sqs.delete_queue(QueueUrl=self._url(channel, kind))
            except Exception as exc:
                if not _gone(exc):
                    raise

    def send_command(self, channel: str, command: Command) -> None:
        self._send(self._url(channel, "cmd"), command.model_dump_json())

    def send_answer(self, channel: str, answer: Answer) -> None:
        self._send(self._url(channel, "ans"), answer.model_dump_json(exclude_none=True))

    def _send(self, url: str, body: str) -> None:
        try:
            self._sqs.send_message(QueueUrl=url, MessageBody=body)
        except Exception as exc:
            if _gone(exc):
                raise ChannelGone(url) from None
            raise

    def next_command(self, channel: str, *, wait_s: int) -> Command | None:
        url = self._url(channel, "cmd")
        try:
            resp = self._sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=1,
                WaitTimeSeconds=max(0, min(wait_s, 20)),
                # Explicit, not the queue's 30 s default: a command not deleted (the
                # worker died between receive and delete) is seen again only after any
                # deadline it could carry, and then answered expired by the ledger.
                VisibilityTimeout=COMMAND_HIDDEN_S,
            )
        except Exception as exc:
            if _gone(exc):
                raise ChannelGone(url) from None
            raise
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
                if _gone(exc):
                    raise ChannelGone(url) from None
                raise
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


def _gone(exc: Exception) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
    return code in _GONE
