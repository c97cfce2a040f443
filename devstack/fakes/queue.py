"""An in-memory SQS for the lifecycle tests: delays, visibility, receive counts, redrive.

Time comes from a ``FakeClock``, so a test moves a message's visibility forward by moving
the clock, never by sleeping. Like SQS, a message received more than ``max_receive_count``
times moves to the pool's dead-letter queue instead of being delivered.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

from pagefleet.adapters.sqs import parse_message
from pagefleet.jobs.ports import Clock, ReceivedMessage
from pagefleet.jobs.record import JobMessage
from pagefleet.specs.resources import MAX_RECEIVE_COUNT


class ReceiptHandleInvalid(Exception):
    """SQS refuses a receipt handle for a message that is gone or received again since."""


@dataclass
class _Message:
    message_id: str
    body: str
    sent_at: float
    visible_at: float
    receive_count: int = 0
    receipts: list[str] = field(default_factory=list)


class FakeQueue:
    def __init__(self, clock: Clock, *, max_receive_count: int = MAX_RECEIVE_COUNT) -> None:
        self._clock = clock
        self._max_receive = max_receive_count
        self._lock = threading.Lock()
        self._queues: dict[str, list[_Message]] = {}
        self.dead_letters: dict[str, list[_Message]] = {}
        self._ids = itertools.count(1)
        self.sent: list[tuple[JobMessage, int]] = []  # every send, for assertions

    def send(self, message: JobMessage, *, delay_seconds: int = 0) -> str:
        now = self._clock.now()
        with self._lock:
            message_id = f"m-{next(self._ids)}"
            self._queues.setdefault(message.queue, []).append(
                _Message(message_id, message.body(), now, now + max(0, delay_seconds))
            )
            self.sent.append((message, delay_seconds))
            return message_id

    def send_raw(self, pool: str, body: str) -> str:
        """A body that is not a job message (poison), as a broken producer would send."""
        now = self._clock.now()
        with self._lock:
            message_id = f"m-{next(self._ids)}"
            self._queues.setdefault(pool, []).append(_Message(message_id, body, now, now))
            return message_id

    def receive(
        self, pool: str, *, max_messages: int, wait_seconds: int, visibility: int
    ) -> list[ReceivedMessage]:
        now = self._clock.now()
        out: list[ReceivedMessage] = []
        with self._lock:
            queue = self._queues.setdefault(pool, [])
            for msg in list(queue):
                if len(out) >= max_messages:
                    break
                if msg.visible_at > now:
                    continue
                if msg.receive_count >= self._max_receive:
                    queue.remove(msg)
                    self.dead_letters.setdefault(pool, []).append(msg)
                    continue
                msg.receive_count += 1
                msg.visible_at = now + visibility
                receipt = f"{msg.message_id}/{msg.receive_count}"
                msg.receipts.append(receipt)
                out.append(
                    parse_message(
                        {
                            "Body": msg.body,
                            "ReceiptHandle": receipt,
                            "MessageId": msg.message_id,
                            "Attributes": {
                                "ApproximateReceiveCount": str(msg.receive_count),
                                "SentTimestamp": str(int(msg.sent_at * 1000)),
                            },
                        },
                        pool,
                    )
                )
        return out

    def delete(self, pool: str, receipt_handle: str) -> None:
        with self._lock:
            msg = self._find(pool, receipt_handle)
            if msg is not None:
                self._queues[pool].remove(msg)

    def delete_batch(self, pool: str, receipt_handles: list[str]) -> list[str]:
        for handle in receipt_handles:
            self.delete(pool, handle)
        return []

    def change_visibility(self, pool: str, receipt_handle: str, seconds: int) -> None:
        with self._lock:
            msg = self._find(pool, receipt_handle)
            if msg is None or msg.receipts[-1] != receipt_handle:
                raise ReceiptHandleInvalid(receipt_handle)
            msg.visible_at = self._clock.now() + seconds

    # --- for assertions -----------------------------------------------------------------------
    def depth(self, pool: str) -> int:
        with self._lock:
            return len(self._queues.get(pool, []))

    def visible(self, pool: str) -> list[JobMessage]:
        now = self._clock.now()
        with self._lock:
            msgs = [m for m in self._queues.get(pool, []) if m.visible_at <= now]
        return [JobMessage.model_validate_json(m.body) for m in msgs]

    def visible_at(self, pool: str) -> list[float]:
        with self._lock:
            return sorted(m.visible_at for m in self._queues.get(pool, []))

    def _find(self, pool: str, receipt_handle: str) -> _Message | None:
        for msg in self._queues.get(pool, []):
            if receipt_handle in msg.receipts:
                return msg
        return None
