"""Receiving from a pool's queues: high priority first, without starving the rest.

SQS has no priorities, so a pool has a queue per priority (``pagefleet.specs.resources``). A slot
that wants a job first short-polls the queues in priority order (high, normal, low), except
that a queue passed over for several jobs in a row gets the first look (normal after
NORMAL_FIRST - 1 jobs, low after LOW_FIRST - 1), so a flood of high jobs cannot starve the
rest. A queue counts as passed over only while it was not looked at: one found empty, or
that gave the job, starts again from zero, so the order follows the jobs taken, never the
idle polls in between (the same jobs queued always start in the same order).

The first two queues of the order are short-polled together when the first was empty at its
last look (the common case: the high queue holds only retries, taken-back jobs and the jobs
asked to go first), so a job from the second costs one round trip before its claim, not two.
When both give a job, the first's is taken and the second's is kept as a *spare*: the next
slot to ask looks at the queues before the spare's own first, so priority holds, and the
first queue is polled alone again until it is found empty. When
all are empty, the worker keeps ONE long poll per queue in flight, shared by its slots: a
message on any queue reaches a waiting slot as soon as it arrives, and an idle worker makes
a handful of requests per poll period, not one per slot per queue. A long poll that returns
a message is started again at once while slots still wait: a burst on an idle worker fills
every slot as fast as the messages arrive, not one slot per poll period.

A long poll that returns a message nobody is waiting for any more (two queues answered at
once) is kept here for the next slot, its visibility refreshed if it waited long, and
handed back to the queue when the worker stops: re-sent, not made visible, so the drain
counts no receive toward the job's dead letters (``give_back``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from pagefleet.jobs.ports import JobQueue, ReceivedMessage
from pagefleet.specs.resources import pool_queues

# The normal queue is looked at first after NORMAL_FIRST - 1 jobs taken without looking at
# it, the low queue after LOW_FIRST - 1.
NORMAL_FIRST = 4
LOW_FIRST = 10
# A message kept this long waiting for a slot gets its visibility (the lease) renewed.
REFRESH_AFTER_S = 10.0


def give_back(queue: JobQueue, message: ReceivedMessage) -> None:
    """Put a received job back for another worker without counting a receive against it.

    Setting its visibility to 0 would leave the receive counted toward the queue's
    maxReceiveCount: every drain (each deploy) would push a job that never ran toward its
    DLQ. A fresh copy starts at zero receives; it is sent before the received one is
    deleted, so a failure between the two leaves a duplicate (the claim is conditional),
    never a lost job. A body that is not a job (poison) goes back as it is: its receives
    should count.
    """
    with contextlib.suppress(Exception):
        if message.message is None:
            queue.change_visibility(message.queue, message.receipt_handle, 0)
            return
        queue.send(message.message)
        queue.delete(message.queue, message.receipt_handle)


class Receiver:
    def __init__(
        self,
        queue: JobQueue,
        pool: str,
        *,
        visibility: int,
        wait_seconds: int,
        stopping: Callable[[], bool],
    ) -> None:
        self._queue = queue
        self._keys = [spec.key for spec in pool_queues(pool)]  # high, normal, low
        self._visibility = visibility
        self._wait = wait_seconds
        self._stopping = stopping
        # Jobs taken in a row without looking at the normal / low queue.
        self._passed_over = dict.fromkeys(self._keys[1:], 0)
        self._ready = threading.Condition()
        self._kept: list[tuple[float, ReceivedMessage]] = []
        self._polling: set[str] = set()
        self._gave: set[str] = set()  # queues whose last long poll returned a message
        # Queues found empty at their last short poll: the first of a pair is one of these.
        self._was_empty: set[str] = set(self._keys)
        # Jobs a paired poll gave beside the one taken: (when, message).
        self._spares: list[tuple[float, ReceivedMessage]] = []
        self._pair_poll = ThreadPoolExecutor(max_workers=2, thread_name_prefix="poll-pair")

    @property
    def queues(self) -> list[str]:
        return list(self._keys)

    def order(self) -> list[str]:
        high, normal, low = self._keys
        with self._ready:
            if self._passed_over[low] >= LOW_FIRST - 1:
                return [low, high, normal]
            if self._passed_over[normal] >= NORMAL_FIRST - 1:
                return [normal, high, low]
        return [high, normal, low]

    def receive(self) -> list[ReceivedMessage]:
        """One message for a slot (or none after a poll period); blocking."""
        kept = self._take_kept()
        if kept is not None:
            self._taken(kept.queue, looked_at=())
            return [kept]
        order = self.order()
        kept_spare = self._take_spare(order)
        if kept_spare is not None:
            since, spare = kept_spare
            # A paired poll passed the queues before the spare's: they go first again.
            ahead = order[: order.index(spare.queue)]
            found, looked_at = self._poll_in_order(ahead)
            if found:
                self._keep_spare(spare, since=since)  # its age goes on: see _refreshed
                return found
            self._taken(spare.queue, looked_at=looked_at)
            return [self._refreshed(since, spare)]
        found, looked_at = self._poll_in_order(order)
        if found:
            return found
        self._taken(None, looked_at=looked_at)  # every queue was empty
        return self._wait_for_one()

    def _poll_in_order(self, order: Sequence[str]) -> tuple[list[ReceivedMessage], list[str]]:
        """The first job of ``order``'s queues, polled in turn (the first two together when
        the first was empty last time); a job found is counted as taken. Returns it (or
        nothing) and the queues found empty."""
        index = 0
        while index < len(order):
            key = order[index]
            with self._ready:
                paired = index + 1 < len(order) and key in self._was_empty
            if paired:
                first, second = self._paired(key, order[index + 1])
                if first:
                    if second:
                        self._keep_spare(second[0])
                    self._taken(key, looked_at=order[:index])
                    return first, list(order[:index])
                if second:
                    self._taken(order[index + 1], looked_at=order[: index + 1])
                    return second, list(order[: index + 1])
                index += 2
                continue
            found = self._short_poll(key)
            if found:
                self._taken(key, looked_at=order[:index])
                return found, list(order[:index])
            index += 1
        return [], list(order)

    def _short_poll(self, key: str) -> list[ReceivedMessage]:
        found = self._queue.receive(
            key, max_messages=1, wait_seconds=0, visibility=self._visibility
        )
        with self._ready:
            if found:
                self._was_empty.discard(key)
            else:
                self._was_empty.add(key)
        return found

    def _paired(
        self, first: str, second: str
    ) -> tuple[list[ReceivedMessage], list[ReceivedMessage]]:
        """Short polls of two queues at once. A poll that failed counts as empty when the
        other gave a job (that job is not left invisible for nothing); else it raises."""
        later: Future[list[ReceivedMessage]] = self._pair_poll.submit(self._short_poll, second)
        try:
            got_first = self._short_poll(first)
        except Exception:
            got_second = later.result()
            if not got_second:
                raise
            return [], got_second
        try:
            got_second = later.result()
        except Exception:
            if not got_first:
                raise
            got_second = []
        return got_first, got_second

    def _keep_spare(self, message: ReceivedMessage, *, since: float | None = None) -> None:
        with self._ready:
            self._spares.append((time.monotonic() if since is None else since, message))

    def _take_spare(self, order: Sequence[str]) -> tuple[float, ReceivedMessage] | None:
        """The spare the order reaches first and since when it is kept, if any (it is the
        caller's now)."""
        with self._ready:
            if not self._spares:
                return None
            self._spares.sort(key=lambda item: order.index(item[1].queue))
            return self._spares.pop(0)

    def _taken(self, key: str | None, *, looked_at: Sequence[str]) -> None:
        """A job was taken from ``key`` (None: none) after finding ``looked_at`` empty."""
        with self._ready:
            for queue in self._passed_over:
                if queue == key or queue in looked_at:
                    self._passed_over[queue] = 0
                elif key is not None:
                    self._passed_over[queue] += 1

    def _wait_for_one(self) -> list[ReceivedMessage]:
        deadline = time.monotonic() + self._wait + 1
        with self._ready:
            started = False
            while not self._kept and not self._stopping():
                for key in self._keys:
                    # A queue whose poll just gave a message may hold more: poll it again
                    # for the slots still waiting, not only after the others' polls end.
                    if key not in self._polling and (not started or key in self._gave):
                        self._polling.add(key)
                        threading.Thread(
                            target=self._long_poll, args=(key,), name=f"poll-{key}", daemon=True
                        ).start()
                started = True
                if not self._polling:
                    break  # every queue was empty for a whole poll
                if not self._ready.wait(timeout=max(0.0, deadline - time.monotonic())):
                    break
        kept = self._take_kept()
        return [kept] if kept is not None else []

    def _long_poll(self, key: str) -> None:
        found: list[ReceivedMessage] = []
        try:
            found = self._queue.receive(
                key, max_messages=1, wait_seconds=self._wait, visibility=self._visibility
            )
        except Exception:
            time.sleep(1)  # the caller's next turn polls again; do not spin on an outage
        if found and self._stopping():
            for message in found:  # nobody will take it: back to its queue at once
                give_back(self._queue, message)
            found = []
        with self._ready:
            self._polling.discard(key)
            if found:
                self._gave.add(key)
            else:
                self._gave.discard(key)
            now = time.monotonic()
            self._kept += [(now, m) for m in found]
            self._ready.notify_all()

    def _take_kept(self) -> ReceivedMessage | None:
        with self._ready:
            if not self._kept:
                return None
            # Highest priority first among what is kept.
            self._kept.sort(key=lambda item: self._keys.index(item[1].queue))
            since, message = self._kept.pop(0)
        return self._refreshed(since, message)

    def _refreshed(self, since: float, message: ReceivedMessage) -> ReceivedMessage:
        """``message``, its visibility renewed if it was kept long."""
        if time.monotonic() - since > REFRESH_AFTER_S:
            with contextlib.suppress(Exception):
                self._queue.change_visibility(
                    message.queue, message.receipt_handle, self._visibility
                )
        return message

    def hand_back(self) -> None:
        """Stopping: what is kept goes back to its queue at once."""
        with self._ready:
            kept, self._kept = self._kept + self._spares, []
            self._spares = []
        for _, message in kept:
            give_back(self._queue, message)
