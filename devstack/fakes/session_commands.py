"""In memory: a session's command ledger (pagefleet.browsing.commands), with its rules."""

from __future__ import annotations

import threading
from typing import Any

from pagefleet.browsing.commands import Claim, CommandRecord, CommandState
from pagefleet.browsing.models import Answer


class FakeCommandLedger:
    def __init__(self) -> None:
        self._records: dict[tuple[str, str, str], CommandRecord] = {}
        self._lock = threading.Lock()

    def record(self, command: CommandRecord) -> CommandRecord:
        key = (command.tenant_id, command.session_id, command.command_id)
        with self._lock:
            return self._records.setdefault(key, command)

    def get(self, tenant_id: str, session_id: str, command_id: str) -> CommandRecord | None:
        return self._records.get((tenant_id, session_id, command_id))

    def _move(
        self, key: tuple[str, str, str], before: CommandState, **update: Any
    ) -> CommandRecord | None:
        found = self._records.get(key)
        if found is None or found.state is not before:
            return None
        moved = found.model_copy(update=update)
        self._records[key] = moved
        return moved

    def claim(
        self, tenant_id: str, session_id: str, command_id: str, *, now: float, order: str
    ) -> Claim:
        key = (tenant_id, session_id, command_id)
        with self._lock:
            found = self._records.get(key)
            if found is not None and found.state is CommandState.PENDING:
                if found.deadline > now:
                    taken = self._move(
                        key, CommandState.PENDING, state=CommandState.RUNNING, order=order
                    )
                    return Claim(verdict="run", record=taken)
                found = self._move(key, CommandState.PENDING, state=CommandState.EXPIRED)
        if found is None or found.state in (CommandState.PENDING, CommandState.RUNNING):
            return Claim(verdict="unknown", record=found)
        return Claim(verdict="answered", record=found)

    def expire(self, tenant_id: str, session_id: str, command_id: str) -> CommandRecord | None:
        key = (tenant_id, session_id, command_id)
        with self._lock:
            self._move(key, CommandState.PENDING, state=CommandState.EXPIRED)
            return self._records.get(key)

    def release(self, tenant_id: str, session_id: str, command_id: str, *, order: str) -> bool:
        key = (tenant_id, session_id, command_id)
        with self._lock:
            found = self._records.get(key)
            if found is None or found.order != order:
                return False
            back = self._move(key, CommandState.RUNNING, state=CommandState.PENDING, order=None)
            return back is not None

    def finish(
        self,
        tenant_id: str,
        session_id: str,
        command_id: str,
        answer: Answer,
        steps: list[dict[str, Any]],
    ) -> None:
        with self._lock:
            self._move(
                (tenant_id, session_id, command_id),
                CommandState.RUNNING,
                state=CommandState.DONE,
                answer=answer,
                steps=list(steps),
            )

    def session_commands(self, tenant_id: str, session_id: str) -> list[CommandRecord]:
        return [r for (t, s, _), r in self._records.items() if (t, s) == (tenant_id, session_id)]
