"""A takeover's input batches, on the fake and on DynamoDB: kept once per number, read back
in order after the last one applied, apart from other takeovers, jobs and tenants and from
the session's commands that share the tenant's ledger partition."""

from __future__ import annotations

import pytest

from devstack.fakes.session_commands import FakeCommandLedger
from devstack.fakes.takeover_inputs import FakeTakeoverInputs
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.session_commands import DynamoCommandLedger
from pagefleet.adapters.dynamodb.takeover_inputs import DynamoTakeoverInputs
from pagefleet.browsing.commands import CommandLedger, CommandRecord, fingerprint
from pagefleet.browsing.input_events import InputRecord, TakeoverInputs
from pagefleet.jobs.models import new_ulid
from pagefleet.runtime import RUNTIME


@pytest.fixture
def stores(backend: str, request: pytest.FixtureRequest) -> tuple[TakeoverInputs, CommandLedger]:
    if backend == "fake":
        return FakeTakeoverInputs(), FakeCommandLedger()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    db = RUNTIME.client("dynamodb")
    return (
        DynamoTakeoverInputs(db, provisioned.jobs_table),
        DynamoCommandLedger(db, provisioned.jobs_table),
    )


def batch(job: str, takeover: str, seq: int, text: str, tenant: str = "acme") -> InputRecord:
    return InputRecord.model_validate(
        {
            "tenant_id": tenant,
            "job_id": job,
            "takeover_id": takeover,
            "seq": seq,
            "frame": {"width": 960, "height": 640},
            "events": [
                {"type": "click", "x": 10.5, "y": 20, "modifiers": ["Shift"]},
                {"type": "text", "text": text},
            ],
            "expires_at": 2_000_000_000,
        }
    )


def test_batches_come_back_in_order_after_the_last_applied_and_apart(
    stores: tuple[TakeoverInputs, CommandLedger],
) -> None:
    inputs, ledger = stores
    job, takeover = new_ulid(), new_ulid()
    for seq in (2, 1, 3):
        inputs.put(batch(job, takeover, seq, f"t{seq}"))
    inputs.put(batch(job, takeover, 2, "a copy"))  # the same number again: the first kept
    inputs.put(batch(job, new_ulid(), 4, "another takeover"))
    inputs.put(batch(new_ulid(), takeover, 5, "another job"))
    inputs.put(batch(job, takeover, 6, "another tenant", tenant="other"))
    # A session's command in the same partition is not an input, nor the other way round.
    ledger.record(
        CommandRecord(
            tenant_id="acme",
            session_id=job,
            command_id="c1",
            fingerprint=fingerprint({}),
            deadline=2_000_000_000,
            created_at="2026-12-05T04:00:00.000Z",
            expires_at=2_000_000_000,
        )
    )
    found = inputs.after("acme", job, takeover, seq=0)
    assert [(r.seq, r.events[1].text) for r in found] == [(1, "t1"), (2, "t2"), (3, "t3")]  # type: ignore[union-attr]
    assert found[0] == batch(job, takeover, 1, "t1")
    assert [r.seq for r in inputs.after("acme", job, takeover, seq=2)] == [3]
    assert [r.seq for r in inputs.after("acme", job, takeover, seq=0, limit=2)] == [1, 2]
    assert inputs.after("acme", job, takeover, seq=3) == []
    assert [c.command_id for c in ledger.session_commands("acme", job)] == ["c1"]
