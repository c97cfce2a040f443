"""Interactive browser sessions in the chaos run (``bench/chaos.py --sessions N``).

N drivers, each a thread playing an agent, open sessions one after another while the
bench kills workers and Chromium, fails AWS calls and delivers messages twice. A session
is one of three kinds: **closed** (a few steps, then DELETE), **abandoned** (two steps, then
nothing: its idle timeout must end it) and **long** (steps until the submissions stop,
so that worker kills land mid-step). Every step opens a page of its own,
``/step/<session>-<n>``, that the chaos site counts, and the driver behaves as a patient
client: a 5xx, a 429 or a lost reply is sent again with the same ``command_id``, and one
step in six is sent a second time on purpose.

What the checks read, once every session has ended:

- **steps run twice**: a step page the site served more than once (a duplicate delivery,
  a client's retry or a redelivered command ran again);
- **steps lost**: a step answered ``ok`` that the session's record does not hold, or a
  step answered ``expired`` whose page was served all the same;
- **leftovers**: a session not ended, a tenant slot still held by an ended job, a queue
  the stack did not provision that is not a live worker's command inbox (a killed worker's
  inbox older than the sweeper's grace was the sweeper's to delete). A slot or queue is a
  leftover when a sweeper pass made after it was seen did not remove it: one seen the moment
  it became the sweeper's (a worker's registry entry lapsing between the run's last pass and
  the look) is what the next pass removes, on AWS within its minute.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devstack.chaos import SETTLED, ChaosSite
from devstack.stack import DEV_TENANT, LocalStack
from pagefleet.adapters.dynamodb import DynamoJobStore
from pagefleet.adapters.dynamodb.tenant_counters import DynamoTenantCounters
from pagefleet.browsing.models import StepsAnswer
from pagefleet.client import ApiError, PagefleetClient
from pagefleet.client.browsing import CommandPending
from pagefleet.errors import NotFound
from pagefleet.jobs.models import new_ulid

KINDS = (("closed", 0.5), ("abandoned", 0.25), ("long", 0.25))
IDLE_TIMEOUT_S = 10  # an abandoned session ends this long after its last step
RESEND_SHARE = 1 / 6  # steps sent again on purpose, with the same command id
ENDED = ("closed", "lost")


@dataclass
class Step:
    session_id: str
    token: str  # the page's name: /step/<token>
    command_id: str
    answer: StepsAnswer | None = None  # what the client was answered, if anything
    resent_differs: bool = False  # the deliberate second send got another answer


@dataclass
class Opened:
    session_id: str
    kind: str
    steps: list[Step] = field(default_factory=list)


@dataclass
class SessionFindings:
    sessions: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    ended: Counter[str] = field(default_factory=Counter)  # closed reason / lost
    steps: int = 0
    answered_ok: int = 0
    answered_expired: int = 0
    unanswered: int = 0  # the client stopped waiting, or the worker went mid-step
    resent: int = 0
    open_refused: Counter[str] = field(default_factory=Counter)
    twice: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)

    def failed(self) -> bool:
        return bool(self.twice or self.lost or self.leftovers)


class SessionTraffic:
    def __init__(self, stack: LocalStack, site: ChaosSite, drivers: int, seed: int = 31) -> None:
        self.stack = stack
        self.site = site
        self.drivers = drivers
        self.seed = seed
        self.opened: list[Opened] = []
        self.refused: Counter[str] = Counter()
        self.resent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> SessionTraffic:
        for n in range(self.drivers):
            rng = random.Random(self.seed + n)
            thread = threading.Thread(target=self._drive, args=(rng,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """No new session or step; the drivers leave their sessions as their kinds say."""
        self._stop.set()
        for thread in self._threads:
            thread.join(300)

    # --- a driver -------------------------------------------------------------------------
    def _drive(self, rng: random.Random) -> None:
        client = self.stack.client()
        try:
            while not self._stop.is_set():
                kind = rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
                opened = self._open(client, kind)
                if opened is None:
                    self._stop.wait(2)
                    continue
                self._run(client, opened, rng)
        finally:
            client.close()

    def _open(self, client: PagefleetClient, kind: str) -> Opened | None:
        idle = IDLE_TIMEOUT_S if kind == "abandoned" else 60
        try:
            view = _patient(lambda: client.open_session(idle_timeout_s=idle, max_duration_s=600))
        except ApiError as exc:  # e.g. 429 while the tenant's slots are full: counted
            with self._lock:
                self.refused[f"{exc.status} {exc.code}"] += 1
            return None
        opened = Opened(view.session_id, kind)
        with self._lock:
            self.opened.append(opened)
        return opened

    def _run(self, client: PagefleetClient, opened: Opened, rng: random.Random) -> None:
        count = {"closed": rng.randint(3, 6), "abandoned": 2, "long": 10_000}[opened.kind]
        for n in range(count):
            if self._stop.is_set() and opened.kind == "long":
                break
            step = Step(opened.session_id, f"{opened.session_id}-{n}", new_ulid())
            opened.steps.append(step)
            if not self._step(client, step, resend=rng.random() < RESEND_SHARE):
                return  # the session ended under it (its worker was killed: lost)
            time.sleep(rng.uniform(0.1, 1.5))  # an agent thinks between steps
        if opened.kind == "closed" or opened.kind == "long":
            # Already ended (a 409): the check reads how.
            with contextlib.suppress(ApiError):
                _patient(lambda: client.close_session(opened.session_id))

    def _step(self, client: PagefleetClient, step: Step, *, resend: bool) -> bool:
        """Run the step as a patient client; False when the session can take no more."""
        url = f"{self.site.url}/step/{step.token}"

        def send() -> StepsAnswer:
            return client.session_steps(
                step.session_id,
                {"action": "goto", "url": url},
                aria=False,
                command_id=step.command_id,
                wait_s=5,
                deadline_s=60,
                give_up_s=90,
            )

        try:
            step.answer = _patient(send)
            if resend:
                with self._lock:
                    self.resent += 1
                again = _patient(send)
                step.resent_differs = (again.ok, again.ran, again.state) != (
                    step.answer.ok,
                    step.answer.ran,
                    step.answer.state,
                )
        except CommandPending:
            return False
        except ApiError as exc:
            if exc.status == 409:  # closed or lost under the step
                return False
            raise
        return step.answer.status not in ENDED

    # --- the checks -----------------------------------------------------------------------
    def settle(self, timeout: float) -> None:
        """Wait until every session opened has ended (abandoned ones by their idle time)."""
        client = self.stack.client()
        deadline = time.monotonic() + timeout
        pending = {o.session_id for o in self.opened}
        while pending and time.monotonic() < deadline:
            for session_id in list(pending):
                if _patient(lambda s=session_id: client.get_session(s)).status in ENDED:
                    pending.discard(session_id)
            time.sleep(1)
        client.close()

    def findings(self, store: DynamoJobStore, sweep: Callable[[], object]) -> SessionFindings:
        """What the checks read; ``sweep`` runs one sweeper pass (the stack's function)."""
        out = SessionFindings(sessions=len(self.opened), resent=self.resent)
        out.open_refused.update(self.refused)
        client = self.stack.client()
        try:
            for opened in self.opened:
                self._check(client, opened, out)
        finally:
            client.close()
        seen = self._leftover_slots(store) + self._leftover_queues()
        if seen:
            sweep()  # a pass that starts after the look: what it leaves, the sweeper left
            still = set(self._leftover_slots(store) + self._leftover_queues())
            out.leftovers += [found for found in seen if found in still]
        return out

    def _check(self, client: PagefleetClient, opened: Opened, out: SessionFindings) -> None:
        out.kinds[opened.kind] += 1
        view = _patient(lambda: client.get_session(opened.session_id))
        if view.status not in ENDED:
            out.leftovers.append(f"session {opened.session_id} still {view.status}")
        out.ended[view.closed_reason or view.status] += 1
        recorded = " ".join(str(s.get("url", "")) for s in view.steps or [])
        for step in opened.steps:
            out.steps += 1
            served = self.site.step_hits[step.token]
            answer = step.answer or self._final_answer(client, step)
            if served > 1:
                out.twice.append(f"{step.token}: served {served} times")
            if step.resent_differs:
                out.twice.append(f"{step.token}: the same command answered two ways")
            if answer is None:
                out.unanswered += 1
                continue
            if answer.state == "expired":
                out.answered_expired += 1
                if served:
                    out.lost.append(f"{step.token}: answered expired, but its page was served")
            elif answer.ok:
                out.answered_ok += 1
                if f"/step/{step.token}" not in recorded:
                    out.lost.append(f"{step.token}: answered ok, not in the session's steps")

    @staticmethod
    def _final_answer(client: PagefleetClient, step: Step) -> StepsAnswer | None:
        try:
            view = _patient(lambda: client.get_command(step.session_id, step.command_id))
        except ApiError:
            return None
        return view.answer

    def _leftover_slots(self, store: DynamoJobStore) -> list[str]:
        """A tenant slot held by a job that has ended (sessions are jobs: every job counts)."""
        from devstack.chaos import dynamodb_client

        assert self.stack.provisioned is not None
        counters = DynamoTenantCounters(
            dynamodb_client(self.stack), self.stack.provisioned.tenants_table
        )
        view = counters.view(DEV_TENANT, now_ms=int(time.time() * 1000))
        out = []
        for job_id in sorted(view.running):
            try:
                record = store.get(DEV_TENANT, job_id)
            except NotFound:
                out.append(f"slot held by {job_id}, which does not exist")
                continue
            if record.status in SETTLED:
                out.append(f"slot held by {job_id}, {record.status.value}")
        return out

    def _leftover_queues(self) -> list[str]:
        """Queues the stack did not provision and a sweeper pass would not have left: a
        killed worker's command inbox past the sweeper's grace, or any other queue (a
        session makes none). A live worker's inbox, or one too young to judge, is not one."""
        from devstack.chaos import dynamodb_client, sqs_client
        from pagefleet.adapters.dynamodb.inboxes import DynamoInboxRegistry
        from pagefleet.browsing.leftovers import INBOX_GRACE_S
        from pagefleet.specs.resources import inbox_queue_prefix

        assert self.stack.provisioned is not None
        sqs = sqs_client(self.stack)
        own = set(self.stack.provisioned.queue_list())
        registry = DynamoInboxRegistry(
            dynamodb_client(self.stack), self.stack.provisioned.jobs_table
        )
        prefix = inbox_queue_prefix("local")
        now = time.time()
        out = []
        for url in sqs.list_queues().get("QueueUrls", []):
            name = url.rsplit("/", 1)[-1]
            if url in own:
                continue
            if name.startswith(prefix):
                created = float(
                    sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["CreatedTimestamp"])[
                        "Attributes"
                    ]["CreatedTimestamp"]
                )
                if now - created < INBOX_GRACE_S or registry.alive(name, now=now):
                    continue
            out.append(f"queue {name}")
        return out


def _patient(call: Any) -> Any:
    """The call, sent again on a 5xx, a 429 or a lost reply, as a patient client would."""
    wait = 0.5
    for _ in range(12):
        try:
            return call()
        except ApiError as exc:
            if exc.status < 500 and exc.status != 429:
                raise
        except OSError:  # the reply was lost: the same request again
            pass
        time.sleep(wait)
        wait = min(4.0, wait * 2)
    return call()


def rows(found: SessionFindings) -> list[tuple[str, str]]:
    kinds = " / ".join(str(found.kinds[k]) for k, _ in KINDS)
    return [
        ("sessions opened (closed / abandoned / long)", f"{found.sessions} ({kinds})"),
        ("  ended as", ", ".join(f"{k}: {v}" for k, v in sorted(found.ended.items())) or "-"),
        (
            "  opens refused (retried later)",
            ", ".join(f"{k}: {v}" for k, v in found.open_refused.items()) or "0",
        ),
        ("session steps sent / sent twice on purpose", f"{found.steps} / {found.resent}"),
        (
            "  answered ok / expired / unanswered",
            f"{found.answered_ok} / {found.answered_expired} / {found.unanswered}",
        ),
        ("STEPS RUN TWICE (must be 0)", str(len(found.twice))),
        ("STEPS LOST (must be 0)", str(len(found.lost))),
        ("LEFTOVERS (must be 0)", str(len(found.leftovers))),
    ]


def details(found: SessionFindings) -> list[str]:
    lines = [f"  step run twice: {t}" for t in found.twice[:20]]
    lines += [f"  step lost: {t}" for t in found.lost[:20]]
    lines += [f"  leftover: {t}" for t in found.leftovers[:20]]
    return lines
