"""An in-memory ``WorkflowStore`` (the contract suite holds it to the DynamoDB one)."""

from __future__ import annotations

import threading

from pagefleet.workflow.versions import VersionTaken, WorkflowVersion


class FakeWorkflowStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._versions: dict[tuple[str, str], dict[int, WorkflowVersion]] = {}

    def put_version(self, tenant_id: str, record: WorkflowVersion) -> None:
        with self._lock:
            versions = self._versions.setdefault((tenant_id, record.name), {})
            if record.version != len(versions) + 1:
                raise VersionTaken(record.version)
            versions[record.version] = record.model_copy(deep=True)

    def latest(self, tenant_id: str, name: str) -> WorkflowVersion | None:
        with self._lock:
            versions = self._versions.get((tenant_id, name), {})
            return versions[max(versions)].model_copy(deep=True) if versions else None

    def get(self, tenant_id: str, name: str, version: int) -> WorkflowVersion | None:
        with self._lock:
            found = self._versions.get((tenant_id, name), {}).get(version)
            return found.model_copy(deep=True) if found else None

    def versions(self, tenant_id: str, name: str) -> list[int]:
        with self._lock:
            return sorted(self._versions.get((tenant_id, name), {}))

    def names(self, tenant_id: str) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(
                (name, max(v)) for (t, name), v in self._versions.items() if t == tenant_id and v
            )
