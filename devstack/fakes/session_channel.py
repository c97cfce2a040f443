"""In memory: a session's command and answer queues (pagefleet.browsing.channel)."""

from __future__ import annotations

import threading
import time
from collections import deque

from pagefleet.browsing.channel import ChannelGone, answer_fate
from pagefleet.browsing.models import Answer, Command


class FakeSessionChannel:
    def __init__(self) -> None:
        self._queues: dict[str, tuple[deque[Command], deque[Answer]]] = {}
        self._changed = threading.Condition()

    def exists(self, channel: str) -> bool:
        return channel in self._queues

    def open(self, channel: str) -> None:
        with self._changed:
            self._queues.setdefault(channel, (deque(), deque()))

    def close(self, channel: str) -> None:
        with self._changed:
            self._queues.pop(channel, None)
            self._changed.notify_all()

    def _pair(self, channel: str) -> tuple[deque[Command], deque[Answer]]:
        pair = self._queues.get(channel)
        if pair is None:
            raise ChannelGone(channel)
        return pair

    def send_command(self, channel: str, command: Command) -> None:
        with self._changed:
            self._pair(channel)[0].append(command)
            self._changed.notify_all()

    def send_answer(self, channel: str, answer: Answer) -> None:
        with self._changed:
            self._pair(channel)[1].append(answer)
            self._changed.notify_all()

    def next_command(self, channel: str, *, wait_s: int) -> Command | None:
        deadline = time.monotonic() + wait_s
        with self._changed:
            while True:
                commands = self._pair(channel)[0]
                if commands:
                    return commands.popleft()
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)

    def await_answer(self, channel: str, command_id: str, *, timeout_s: float) -> Answer | None:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                answers = self._pair(channel)[1]
                for answer in list(answers):
                    fate = answer_fate(answer.id, command_id)
                    if fate == "release":
                        continue
                    answers.remove(answer)
                    if fate == "take":
                        return answer
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
