"""A session's command and answer queues in SQS (pagefleet.browsing.channel)."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pagefleet.browsing.channel import ChannelGone, answer_fate
from pagefleet.browsing.models import Answer, Command

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# A command or answer older than this is of no use to anyone (a step waits far less).
RETENTION_S = 900
log = logging.getLogger("pagefleet.session_channel")
_GONE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")


class SqsSessionChannel:
    def __init__(self, client: SQSClient, *, prefix: str, queue_url_base: str) -> None:
        """``queue_url_base``: the account's queue URL up to the name (``.../<account>/``)."""
        self._sqs = client
        self._prefix = prefix
        self._base = queue_url_base if queue_url_base.endswith("/") else queue_url_base + "/"
        # Deletions that need not hold up a step: done by one thread, in order.
        self._later = ThreadPoolExecutor(max_workers=1, thread_name_prefix="session-acks")

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
                QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=max(0, min(wait_s, 20))
            )
        except Exception as exc:
            if _gone(exc):
                raise ChannelGone(url) from None
            raise
        for message in resp.get("Messages", []):
            # Taken for good: a command runs at most once (a worker that dies mid-command
            # loses the session with it). Deleted off the step's path; until then it stays
            # hidden for longer than it can be kept.
            self._later.submit(self._delete, url, message["ReceiptHandle"])
            return Command.model_validate_json(message["Body"])
        return None

    def _delete(self, url: str, handle: str) -> None:
        try:
            self._sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
        except Exception as exc:  # the queue went with its session: nothing left to delete
            if not _gone(exc):
                log.warning("deleting a session command failed: %s", exc)

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
                    self._later.submit(self._delete, url, handle)
            if found is not None:
                return found
        return None


def _gone(exc: Exception) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
    return code in _GONE
