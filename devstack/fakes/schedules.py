"""In-memory schedule store and Scheduler mirror."""

from __future__ import annotations

import threading

from pagefleet.errors import NotFound
from pagefleet.schedules.health import ScheduleHealth
from pagefleet.schedules.service import Schedule, ScheduleRun

# What runs write beside the definition (a replace keeps them), as the adapter does.
_RUN_OWNED = ("last_run", "health", "baseline_job_id")


class FakeScheduleStore:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._schedules: dict[tuple[str, str], Schedule] = {}
        self._runs: dict[tuple[str, str], dict[str, ScheduleRun]] = {}

    def create(self, schedule: Schedule) -> None:
        with self._lock:
            key = (schedule.tenant_id, schedule.schedule_id)
            if key in self._schedules:
                raise ValueError("exists")
            self._schedules[key] = schedule.model_copy(deep=True)

    def replace(self, schedule: Schedule) -> None:
        with self._lock:
            key = (schedule.tenant_id, schedule.schedule_id)
            if key not in self._schedules:
                raise NotFound(f"schedule {schedule.schedule_id} not found", field="schedule_id")
            current = self._schedules[key]
            keep = {name: getattr(current, name) for name in _RUN_OWNED}
            self._schedules[key] = schedule.model_copy(update=keep, deep=True)

    def get(self, tenant_id: str, schedule_id: str) -> Schedule:
        with self._lock:
            found = self._schedules.get((tenant_id, schedule_id.lower()))
            if found is None:
                raise NotFound(f"schedule {schedule_id} not found", field="schedule_id")
            return found.model_copy(deep=True)

    def list_for(self, tenant_id: str) -> list[Schedule]:
        with self._lock:
            return sorted(
                (s for (t, _), s in self._schedules.items() if t == tenant_id),
                key=lambda s: s.schedule_id,
            )

    def delete(self, tenant_id: str, schedule_id: str) -> None:
        with self._lock:
            self._schedules.pop((tenant_id, schedule_id.lower()), None)

    def mark_synced(self, tenant_id: str, schedule_id: str, updated_at: str) -> None:
        with self._lock:
            found = self._schedules.get((tenant_id, schedule_id))
            if found is not None and found.updated_at == updated_at:
                self._schedules[(tenant_id, schedule_id)] = found.model_copy(
                    update={"synced": True}
                )

    def unsynced(self, limit: int = 100) -> list[tuple[str, str]]:
        with self._lock:
            return [k for k, s in self._schedules.items() if not s.synced][:limit]

    def record_run(self, tenant_id: str, schedule_id: str, run: ScheduleRun) -> bool:
        with self._lock:
            runs = self._runs.setdefault((tenant_id, schedule_id), {})
            if run.scheduled_time in runs or (tenant_id, schedule_id) not in self._schedules:
                return False
            runs[run.scheduled_time] = run
            current = self._schedules[(tenant_id, schedule_id)]
            self._schedules[(tenant_id, schedule_id)] = current.model_copy(update={"last_run": run})
            return True

    def runs(self, tenant_id: str, schedule_id: str, limit: int) -> list[ScheduleRun]:
        with self._lock:
            runs = self._runs.get((tenant_id, schedule_id), {})
            return [runs[t] for t in sorted(runs, reverse=True)][:limit]

    def set_baseline(self, tenant_id: str, schedule_id: str, job_id: str | None) -> None:
        self._change(tenant_id, schedule_id, baseline_job_id=job_id)

    def record_health(
        self, tenant_id: str, schedule_id: str, health: ScheduleHealth, *, counted: str | None
    ) -> bool:
        with self._lock:
            current = self._existing(tenant_id, schedule_id)
            if current.health.last_job_id != counted:
                return False
            self._change(tenant_id, schedule_id, health=health)
            return True

    def _change(self, tenant_id: str, schedule_id: str, **fields: object) -> None:
        with self._lock:
            current = self._existing(tenant_id, schedule_id)
            self._schedules[(tenant_id, schedule_id)] = current.model_copy(update=fields)

    def _existing(self, tenant_id: str, schedule_id: str) -> Schedule:
        found = self._schedules.get((tenant_id, schedule_id))
        if found is None:
            raise NotFound(f"schedule {schedule_id} not found", field="schedule_id")
        return found


class FakeMirror:
    def __init__(self) -> None:
        self.schedules: dict[str, Schedule] = {}
        self.fail = False

    def sync(self, schedule: Schedule) -> None:
        if self.fail:
            raise ConnectionError("scheduler unavailable")
        self.schedules[schedule.schedule_id] = schedule

    def remove(self, schedule_id: str) -> None:
        if self.fail:
            raise ConnectionError("scheduler unavailable")
        self.schedules.pop(schedule_id, None)
