"""The worker's queue with its deletes gathered: ten messages a request, not one.

Once a job's claim is written its message is only a copy waiting to come back (the lease
holds the job, browser_task.slot.worker), so it need not be deleted that instant. A slot's
deletes are kept here and sent as ``DeleteMessageBatch`` (up to ten a request) when ten
are waiting or the oldest has waited ``DELETE_WITHIN_S``, and whatever is left when the
worker stops. Everything else goes straight to the queue.

Each waits far less than the visibility it was received with (the lease, at least 10 s),
so no message comes back because its delete waited. One whose delete fails, or that a
killed worker had not sent yet, comes back after its visibility timeout as a copy of a job
that runs or ended, and is deleted then (``Lifecycle.claim``). SQS counts an undeleted
message in its ``ApproximateAgeOfOldestMessage`` ("the oldest non-deleted message in the
queue"), which the pools scale on: a second at most, against scaling steps of minutes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from browser_task.gathered import Gathered, GatheredPart
from pagefleet.jobs.moves import headline
from pagefleet.jobs.ports import SQS_BATCH_MAX, JobQueue, ReceivedMessage
from pagefleet.jobs.record import JobMessage

log = logging.getLogger("browser_task.slot.deletes")

# How long a delete may wait for others to share its request.
DELETE_WITHIN_S = 1.0


class GatheredDeletes(GatheredPart):
    """A ``JobQueue`` whose ``delete`` is sent in batches (the rest is the queue's own)."""

    def __init__(
        self,
        queue: JobQueue,
        *,
        within_s: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._queue = queue
        # queue key -> the receipt handles waiting for their delete
        self._gathered: Gathered[str, str] = Gathered(
            self._send,
            within_s=DELETE_WITHIN_S if within_s is None else within_s,
            full=SQS_BATCH_MAX,
            monotonic=monotonic,
        )

    # --- the queue, as it is ---------------------------------------------------------------
    def send(self, message: JobMessage, *, delay_seconds: int = 0) -> str:
        return self._queue.send(message, delay_seconds=delay_seconds)

    def receive(
        self, queue: str, *, max_messages: int, wait_seconds: int, visibility: int
    ) -> list[ReceivedMessage]:
        return self._queue.receive(
            queue, max_messages=max_messages, wait_seconds=wait_seconds, visibility=visibility
        )

    def change_visibility(self, queue: str, receipt_handle: str, seconds: int) -> None:
        self._queue.change_visibility(queue, receipt_handle, seconds)

    def delete_batch(self, queue: str, receipt_handles: list[str]) -> list[str]:
        return self._queue.delete_batch(queue, receipt_handles)

    # --- deletes, gathered -----------------------------------------------------------------
    def delete(self, queue: str, receipt_handle: str) -> None:
        """Kept to be sent with others; sent at once when it makes a full batch."""
        self._gathered.add(queue, receipt_handle)

    def _send(self, queue: str, handles: list[str]) -> None:
        try:
            failed = self._queue.delete_batch(queue, handles)
        except Exception as exc:
            failed, why = handles, headline(exc)
        else:
            why = "refused by the queue"
        if failed:
            # Each comes back as a copy of a job that runs or ended, and is deleted then.
            log.warning("%d message deletes not done (%s)", len(failed), why)
