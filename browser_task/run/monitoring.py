"""A monitor's run against its baseline, in the worker, after the browser is closed.

The worker already holds this run's result and tracked screenshot, so comparing here costs
one read of the baseline's record (and its ``data.json`` or screenshot when needed) and a
few milliseconds of CPU (docs/performance.md, "Monitors"), off the slot's path: the slot
has taken its next job by then. The outcome carries ``changes`` to the same write that ends
the job, so the stream's final transition already says what changed.

The baseline is the job's ``monitor.baseline_job_id``, else its schedule's pinned baseline,
else the schedule's last successful run (kept by ``pagefleet.schedules.health``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from browser_task.errors import RetryJob, first_line
from browser_task.run.visual import pixel_diff
from browser_task.tenant.access import TenantDataSource
from browser_task.tenant.artifacts import ArtifactCollector
from pagefleet.errors import NotFound
from pagefleet.jobs.ports import ArtifactStore, JobStore
from pagefleet.jobs.record import Artifact, JobRecord
from pagefleet.jobs.rules import gone
from pagefleet.jobs.states import JobStatus
from pagefleet.monitors.changes import (
    CHANGES_ARTIFACT,
    DIFF_ARTIFACT,
    Changes,
    VisualChange,
    compare,
)
from pagefleet.monitors.spec import Monitor
from pagefleet.specs.resources import ROUTINE

if TYPE_CHECKING:
    from pagefleet.schedules.service import ScheduleStore

NO_SCHEDULE_BASELINE = (
    "no baseline: this is the schedule's first successful run; later runs are compared with it"
)
NO_JOB_BASELINE = "no baseline: name an earlier job in monitor.baseline_job_id"


def stored_result(job: JobRecord, artifacts: ArtifactStore) -> dict[str, Any] | None:
    """A job's result: inline in its record, or its ``data.json`` when too big to keep."""
    if job.result is not None or job.result_artifact is None:
        return job.result
    kept = latest(job, job.result_artifact)
    if kept is None:
        return None
    loaded: dict[str, Any] = json.loads(artifacts.get(kept.key))
    return loaded


def latest(job: JobRecord, name: str) -> Artifact | None:
    """The job's artifact ``name`` from its latest attempt that made one."""
    return next((a for a in reversed(job.artifacts) if a.name == name), None)


@dataclass(frozen=True)
class Baselines:
    """Where a monitor's baseline is found: job records, schedules, the tenant's artifacts."""

    jobs: JobStore
    # The schedules' store, made when a monitor's job first needs it (None: no schedules).
    schedules: Callable[[], ScheduleStore] | None
    tenant_data: TenantDataSource
    clock: Callable[[], float]  # the lifecycle's

    def baseline_id(self, job: JobRecord) -> tuple[str | None, str]:
        """The baseline's job id, or None and why there is none."""
        monitor = job.request.monitor
        if monitor is not None and monitor.baseline_job_id is not None:
            return monitor.baseline_job_id, ""
        if job.schedule_id is None or self.schedules is None:
            return None, NO_JOB_BASELINE
        try:
            schedule = self.schedules().get(job.tenant_id, job.schedule_id)
        except NotFound:
            return None, "no baseline: the schedule that made this job no longer exists"
        found = schedule.baseline_job_id or schedule.health.last_success_job_id
        return (found, "") if found and found != job.job_id else (None, NO_SCHEDULE_BASELINE)

    async def changes(
        self,
        job: JobRecord,
        result: dict[str, Any],
        screenshot: bytes | None,
        artifacts: ArtifactCollector,
    ) -> Changes:
        """This run against its baseline; ``changes.json`` (and ``diff.png``) as artifacts.

        A baseline that cannot be read now (the store did not answer) retries the job; one
        that is gone (deleted, expired) makes a run without a baseline, which says why."""
        monitor = job.request.monitor
        assert monitor is not None
        try:
            found = await asyncio.to_thread(self._compare, job, monitor, result, screenshot)
        except NotFound as gone:
            found = Changes.no_baseline(f"no baseline: {gone.message}"), None
        except Exception as exc:
            if _missing_object(exc):  # its data.json or screenshot expired
                why = "no baseline: the baseline's stored result or screenshot is gone"
                return await self._keep(Changes.no_baseline(why), None, artifacts)
            raise RetryJob(
                f"the monitor's baseline could not be read: {first_line(str(exc))}",
                kind="baseline_unavailable",
            ) from exc
        return await self._keep(*found, artifacts)

    async def _keep(
        self, changes: Changes, diff_png: bytes | None, artifacts: ArtifactCollector
    ) -> Changes:
        if diff_png is not None:
            artifacts.add(DIFF_ARTIFACT, diff_png, "image/png", retention=ROUTINE)
        text = changes.model_dump_json(indent=2).encode()
        artifacts.add(CHANGES_ARTIFACT, text, "application/json", retention=ROUTINE)
        return changes

    def _compare(
        self, job: JobRecord, monitor: Monitor, result: dict[str, Any], screenshot: bytes | None
    ) -> tuple[Changes, bytes | None]:
        baseline_id, why = self.baseline_id(job)
        if baseline_id is None:
            return Changes.no_baseline(why), None
        baseline = self.jobs.get(job.tenant_id, baseline_id, consistent=False)
        if gone(baseline, self.clock()):  # TTL deletes it days later; its artifacts may be gone
            return Changes.no_baseline(
                f"no baseline: job {baseline_id} is past its retention"
            ), None
        if baseline.status is not JobStatus.SUCCEEDED:
            why = f"no baseline: job {baseline_id} is {baseline.status.value}, not succeeded"
            return Changes.no_baseline(why), None
        store = self.tenant_data(job.tenant_id).artifacts
        before = stored_result(baseline, store) or {}
        visual, diff_png = None, None
        if job.request.tracked_screenshot is not None:
            visual, diff_png = self._visual(job, baseline, monitor, screenshot, store)
        changes = compare(before, result, monitor, baseline_job_id=baseline_id, visual=visual)
        return changes, diff_png

    def _visual(
        self,
        job: JobRecord,
        baseline: JobRecord,
        monitor: Monitor,
        screenshot: bytes | None,
        store: ArtifactStore,
    ) -> tuple[VisualChange, bytes | None]:
        name = job.request.tracked_screenshot
        assert name is not None
        kept = latest(baseline, name)
        if screenshot is None or kept is None:
            which = "this run" if screenshot is None else f"the baseline {baseline.job_id}"
            note = f"{which} has no screenshot {name}: nothing to compare"
            return VisualChange(
                ratio=0.0, threshold=monitor.threshold, changed=False, note=note
            ), None
        diff = pixel_diff(store.get(kept.key), screenshot)
        changed = diff.ratio > monitor.threshold
        visual = VisualChange(
            ratio=diff.ratio,
            threshold=monitor.threshold,
            changed=changed,
            diff_artifact=DIFF_ARTIFACT if changed else None,
            note=diff.note,
        )
        return visual, diff.diff_png if changed else None


def _missing_object(exc: Exception) -> bool:
    error = getattr(exc, "response", None)
    code = error.get("Error", {}).get("Code") if isinstance(error, dict) else None
    return code in ("NoSuchKey", "404")
