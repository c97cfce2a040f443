"""A session command's answer as the caller reads it: links in place of the S3 keys it holds."""

from __future__ import annotations

from collections.abc import Callable

from pagefleet.browsing.commands import (
    EXPIRED_KIND,
    CommandLedger,
    CommandRecord,
    CommandState,
    expired_answer,
)
from pagefleet.browsing.models import (
    Answer,
    PartLink,
    PartRef,
    SessionFile,
    SessionStatus,
    StepsAnswer,
)

# A key in the artifacts bucket -> a link that lasts as long as the platform's links do.
Presign = Callable[[str], str]


def answered(
    presign: Presign, record: CommandRecord, status: SessionStatus, *, ttl_s: int
) -> StepsAnswer:
    """The recorded answer of a command, or ``expired`` when it never ran; its links last
    ``ttl_s`` seconds."""
    answer = record.answer
    if record.state is CommandState.EXPIRED or answer is None:
        answer = expired_answer(record.command_id)
    return steps_answer(presign, record.session_id, record.command_id, answer, status, ttl_s=ttl_s)


def steps_answer(
    presign: Presign,
    session_id: str,
    command_id: str,
    answer: Answer,
    status: SessionStatus,
    *,
    ttl_s: int,
) -> StepsAnswer:
    observation = answer.observation
    if observation is not None and answer.screenshot_key is not None:
        observation = observation.model_copy(
            update={"screenshot_url": presign(answer.screenshot_key)}
        )
    parts = {name: _link(presign, part, ttl_s) for name, part in answer.parts.items()}
    expired = answer.error is not None and answer.error.get("kind") == EXPIRED_KIND
    return StepsAnswer(
        session_id=session_id,
        command_id=command_id,
        state="expired" if expired else "done",
        status=status,
        ok=answer.ok,
        ran=answer.ran,
        result=answer.result,
        error=answer.error,
        observation=observation,
        parts=parts,
        files={name: _link(presign, part, ttl_s) for name, part in answer.files.items()},
    )


def _link(presign: Presign, part: PartRef, ttl_s: int) -> PartLink:
    return PartLink(url=presign(part.key), expires_in=ttl_s, **part.model_dump(exclude={"key"}))


def files_made(
    presign: Presign, ledger: CommandLedger, tenant_id: str, session_id: str, *, ttl_s: int
) -> list[SessionFile]:
    """Every file the session's steps made, in the order they ran, each with a link."""
    done = [
        c
        for c in ledger.session_commands(tenant_id, session_id)
        if c.answer is not None and c.answer.files
    ]
    done.sort(key=lambda c: c.order or "")
    return [
        SessionFile(name=name, **_link(presign, part, ttl_s).model_dump())
        for c in done
        for name, part in (c.answer.files.items() if c.answer is not None else [])
    ]
