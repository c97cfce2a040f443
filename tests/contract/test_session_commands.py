"""A session's command ledger, on the fake and on DynamoDB: a command is taken to run once,
a copy or a retry finds it taken, one past its deadline is expired and never taken, and the
steps of the answered commands come back in the order they ran."""

from __future__ import annotations

import pytest

from devstack.fakes.session_commands import FakeCommandLedger
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.session_commands import DynamoCommandLedger
from pagefleet.browsing.commands import (
    CommandLedger,
    CommandRecord,
    CommandState,
    fingerprint,
    session_steps,
)
from pagefleet.browsing.models import Answer
from pagefleet.jobs.models import new_ulid
from pagefleet.runtime import RUNTIME

NOW = 1_900_000_000.0


@pytest.fixture
def ledger(backend: str, request: pytest.FixtureRequest) -> CommandLedger:
    if backend == "fake":
        return FakeCommandLedger()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return DynamoCommandLedger(RUNTIME.client("dynamodb"), provisioned.jobs_table)


def command(session: str, command_id: str, *, deadline: float = NOW + 60) -> CommandRecord:
    return CommandRecord(
        tenant_id="acme",
        session_id=session,
        command_id=command_id,
        fingerprint=fingerprint({"steps": [command_id]}),
        deadline=deadline,
        created_at="2026-12-03T10:00:00.000Z",
        expires_at=int(NOW) + 3600,
    )


def test_a_command_is_taken_once_and_a_copy_is_answered_from_its_record(
    ledger: CommandLedger,
) -> None:
    session = new_ulid()
    first = ledger.record(command(session, "buy-1"))
    assert ledger.record(command(session, "buy-1")) == first  # a retry finds the first

    taken = ledger.claim("acme", session, "buy-1", now=NOW, order="0001")
    assert taken.verdict == "run" and taken.record is not None
    assert taken.record.state is CommandState.RUNNING
    # A copy delivered while it runs is not taken again.
    assert ledger.claim("acme", session, "buy-1", now=NOW, order="0002").verdict == "unknown"

    steps = [{"action": "click", "selector": "#buy"}]
    ledger.finish("acme", session, "buy-1", Answer(id="d1", ran=1, result={"n": 1}), steps)
    copy = ledger.claim("acme", session, "buy-1", now=NOW, order="0003")
    assert copy.verdict == "answered" and copy.record is not None
    assert copy.record.answer is not None and copy.record.answer.result == {"n": 1}
    assert copy.record.steps == steps
    assert ledger.get("acme", session, "buy-1") == copy.record
    assert ledger.get("other", session, "buy-1") is None  # another tenant's partition


def test_a_command_past_its_deadline_is_expired_and_never_taken(ledger: CommandLedger) -> None:
    session = new_ulid()
    ledger.record(command(session, "late", deadline=NOW - 1))
    claim = ledger.claim("acme", session, "late", now=NOW, order="0001")
    assert claim.verdict == "answered" and claim.record is not None
    assert claim.record.state is CommandState.EXPIRED
    ledger.finish("acme", session, "late", Answer(id="x"), [])  # not running: no effect
    found = ledger.get("acme", session, "late")
    assert found is not None and found.state is CommandState.EXPIRED

    ledger.record(command(session, "ended"))
    expired = ledger.expire("acme", session, "ended")  # its session ended before it ran
    assert expired is not None and expired.state is CommandState.EXPIRED
    assert ledger.claim("acme", session, "ended", now=NOW, order="2").verdict == "answered"


def test_the_steps_of_answered_commands_come_back_in_the_order_they_ran(
    ledger: CommandLedger,
) -> None:
    session, other = new_ulid(), new_ulid()
    # Ids the caller chose, in no order of their own: the claim's order is what counts.
    for order, cid in enumerate(["zeta", "alpha", "mid", "never"]):
        ledger.record(command(session, cid))
        if cid == "never":
            continue
        ledger.claim("acme", session, cid, now=NOW, order=f"{order:04d}")
        ledger.finish("acme", session, cid, Answer(id=cid), [{"action": "goto", "url": cid}])
    ledger.record(command(other, "zeta"))

    assert [s["url"] for s in session_steps(ledger, "acme", session)] == ["zeta", "alpha", "mid"]
    assert session_steps(ledger, "acme", other) == []


def test_a_claim_is_given_back_by_its_own_order_only_and_taken_again_after(
    ledger: CommandLedger,
) -> None:
    session = new_ulid()
    ledger.record(command(session, "c"))
    assert ledger.claim("acme", session, "c", now=NOW, order="0001").verdict == "run"
    # Another claim's order does not give it back; its own does, once.
    assert not ledger.release("acme", session, "c", order="0002")
    assert ledger.release("acme", session, "c", order="0001")
    assert not ledger.release("acme", session, "c", order="0001")
    back = ledger.get("acme", session, "c")
    assert back is not None and back.state is CommandState.PENDING and back.order is None
    again = ledger.claim("acme", session, "c", now=NOW, order="0003")
    assert again.verdict == "run" and again.record is not None and again.record.order == "0003"


def test_a_claim_before_its_record_finds_nothing_to_run_and_makes_no_record(
    ledger: CommandLedger,
) -> None:
    # The wake-up is sent while the API writes the record: it may come first.
    session = new_ulid()
    early = ledger.claim("acme", session, "on-its-way", now=NOW, order="0001")
    assert early.verdict == "unknown" and early.record is None
    assert ledger.get("acme", session, "on-its-way") is None
    ledger.record(command(session, "on-its-way"))
    assert ledger.claim("acme", session, "on-its-way", now=NOW, order="0002").verdict == "run"


def test_a_refused_claim_says_why_in_the_same_request(request: pytest.FixtureRequest) -> None:
    """On DynamoDB, a claim that does not win (not recorded yet, taken, answered) is one
    conditional write that returns the item as it was: it used to cost two more requests
    (the expiry's try and a read) on the path of a step whose wake-up came first."""
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    db = RUNTIME.client("dynamodb")
    ledger = DynamoCommandLedger(db, provisioned.jobs_table)
    calls: list[str] = []

    def count(model: object, **_: object) -> None:
        calls.append(str(getattr(model, "name", "?")))

    session = new_ulid()
    db.meta.events.register("before-call.dynamodb", count)
    try:
        assert ledger.claim("acme", session, "c", now=NOW, order="1").verdict == "unknown"
        ledger.record(command(session, "c"))
        assert ledger.claim("acme", session, "c", now=NOW, order="2").verdict == "run"
        assert ledger.claim("acme", session, "c", now=NOW, order="3").verdict == "unknown"
        ledger.finish("acme", session, "c", Answer(id="d", ran=1), [])
        assert ledger.claim("acme", session, "c", now=NOW, order="4").verdict == "answered"
        late = command(session, "late", deadline=NOW - 1)
        ledger.record(late)
        claimed = ledger.claim("acme", session, "late", now=NOW, order="5")
        assert claimed.verdict == "answered" and claimed.record is not None
        assert claimed.record.state is CommandState.EXPIRED
    finally:
        db.meta.events.unregister("before-call.dynamodb", count)
    assert calls == [
        "UpdateItem",  # not recorded yet
        "PutItem",
        "UpdateItem",  # taken
        "UpdateItem",  # a copy: running
        "UpdateItem",  # the answer
        "UpdateItem",  # a copy: answered
        "PutItem",
        "UpdateItem",  # past its deadline: refused, then expired
        "UpdateItem",
    ]
