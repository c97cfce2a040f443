"""The chaos run's probes (``bench/chaos_traffic.py`` drives them): a webhook receiver
that fails a third of the time, live followers that drop their socket, and pauses of the
embedded AWS. Everything listens on and talks to 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import connect

from devstack.loopback import LoopbackServer, serve_on_loopback
from devstack.stack import LocalStack
from pagefleet.client import ApiError, PagefleetClient
from pagefleet.client.follow import Follower, FollowNotFound
from pagefleet.live.events import RunEvent


def epoch(stamp: str | None) -> float | None:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None


def patient(call: Callable[[], Any], tries: int = 20) -> Any:
    """Call the API like a patient client: back off on 429 and 5xx, give up on other 4xx."""
    wait = 0.5
    for _ in range(tries - 1):
        try:
            return call()
        except ApiError as exc:
            if exc.status < 500 and exc.status != 429:
                raise
        time.sleep(wait)
        wait = min(4.0, wait * 2)
    return call()


# --- the webhook receiver ---------------------------------------------------------------------
@dataclass
class Hooks:
    """What the receiver got, per job: the delivery ids of ``job.finished`` and whether one
    of its POSTs was answered 2xx."""

    delivery_ids: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    delivered: set[str] = field(default_factory=set)
    posts: int = 0
    refused: int = 0  # answered 500 on purpose
    lock: threading.Lock = field(default_factory=threading.Lock)


def webhook_receiver(hooks: Hooks, rng: random.Random) -> LoopbackServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with hooks.lock:
                hooks.posts += 1
                fail = rng.random() < 1 / 3
                with contextlib.suppress(ValueError):
                    data = json.loads(body)
                    if data.get("event") == "job.finished":
                        hooks.delivery_ids[data["job_id"]].add(data["delivery_id"])
                        if not fail:
                            hooks.delivered.add(data["job_id"])
                hooks.refused += fail
            self.send_response(500 if fail else 204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return serve_on_loopback(Handler, "chaos-webhooks")


# --- live followers ---------------------------------------------------------------------------
@dataclass
class Followed:
    job_id: str
    seen: list[int] = field(default_factory=list)  # seqs the follower yielded, in order
    reconnects: int = 0
    done: bool = False
    error: str | None = None


def follow_with_drops(
    client: PagefleetClient, url: str, item: Followed, rng: random.Random, deadline: float
) -> None:
    """Follow a job as the SDK does, but drop the socket every 0.5-4 s and subscribe again
    with ``after=<last seq>``; a gap the protocol notices is filled from the events route,
    as the SDK fills it."""
    follower = Follower(item.job_id)
    headers = {"Authorization": f"Bearer {client.api_key}"}

    def take(items: list[Any]) -> None:
        item.seen += [i.seq for i in items if isinstance(i, RunEvent)]

    def fill() -> None:
        follower.gap = False
        while True:
            page = patient(lambda: client.events(item.job_id, after=follower.last_seq, limit=1000))
            take(follower.on_events((e.wire() for e in page.events), stored=True))
            if not page.more:
                return

    while not follower.done and time.monotonic() < deadline:
        try:
            with connect(url, additional_headers=headers, open_timeout=30, proxy=None) as ws:
                ws.send(follower.subscribe_message())
                until = time.monotonic() + rng.uniform(0.5, 4.0)
                while not follower.done and (left := until - time.monotonic()) > 0:
                    with contextlib.suppress(TimeoutError):
                        take(follower.on_message(json.loads(ws.recv(timeout=left))))
                        if follower.gap and not follower.done:
                            fill()
        except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed):
            time.sleep(0.5)  # a refused or dropped socket: subscribe again
        except FollowNotFound as exc:
            item.error = str(exc)
            return
        item.reconnects += 1
    if follower.done:
        fill()  # the events stored before the final status, as the SDK drains them
        item.done = True


# --- the embedded AWS's pauses ---------------------------------------------------------------
class AwsPauses:
    """Freeze the embedded AWS (SIGSTOP) for ``seconds`` every ``every`` seconds, as a
    regional brown-out would: every call of every process waits, heartbeats included."""

    def __init__(self, stack: LocalStack, every: float, seconds: float) -> None:
        self.stack, self.every, self.seconds = stack, every, seconds
        self.count = 0
        # When each freeze began and ended (epoch s): a killed worker's job cannot be taken
        # back while the embedded AWS is frozen, and the report says which recoveries met one.
        self.windows: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="aws-pauses", daemon=True)

    def start(self) -> AwsPauses:
        if self.every > 0:
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            moto = self.stack.moto
            if moto is None or not moto.alive():
                return
            os.kill(moto.pid, signal.SIGSTOP)
            began = time.time()
            try:
                self._stop.wait(self.seconds)
            finally:
                os.kill(moto.pid, signal.SIGCONT)
                self.windows.append((began, time.time()))
            self.count += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.seconds + 5)
