"""Input batches in memory, as pagefleet/adapters/dynamodb/takeover_inputs.py keeps them."""

from __future__ import annotations

import threading

from pagefleet.browsing.input_events import InputRecord


class FakeTakeoverInputs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[tuple[str, str, str, int], InputRecord] = {}

    def put(self, record: InputRecord) -> None:
        key = (record.tenant_id, record.job_id, record.takeover_id, record.seq)
        with self._lock:
            self._records.setdefault(key, record)

    def after(
        self, tenant_id: str, job_id: str, takeover_id: str, *, seq: int, limit: int = 20
    ) -> list[InputRecord]:
        with self._lock:
            found = [
                r
                for (t, j, k, n), r in self._records.items()
                if (t, j, k) == (tenant_id, job_id, takeover_id) and n > seq
            ]
        return sorted(found, key=lambda r: r.seq)[:limit]
