"""The client's calls for named workflows and schedules (a part of ``PagefleetClient``)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any, Protocol

import httpx

from pagefleet.api.jobs import SubmitResponse
from pagefleet.api.meta import FleetStatsView
from pagefleet.api.schedules import ScheduleList, ScheduleRuns, ScheduleView
from pagefleet.api.workflows import WorkflowDiff, WorkflowList, WorkflowStored, WorkflowVersionView


class _Requests(Protocol):
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...


class DispatchCalls:
    """Mixed into ``PagefleetClient``: every method is one API call."""

    # --- named workflows ----------------------------------------------------------------------
    def put_workflow(self: _Requests, name: str, definition: Mapping[str, Any]) -> WorkflowStored:
        """Store ``definition`` (steps, default inputs, options) as the next version."""
        response = self._request("PUT", f"/v1/workflows/{name}", json=dict(definition))
        return WorkflowStored.model_validate_json(response.content)

    def workflows(self: _Requests) -> WorkflowList:
        return WorkflowList.model_validate_json(self._request("GET", "/v1/workflows").content)

    def workflow(self: _Requests, name: str, version: int | None = None) -> WorkflowVersionView:
        """The latest version (with the list of versions), or the version given."""
        path = f"/v1/workflows/{name}" + (f"/versions/{version}" if version else "")
        return WorkflowVersionView.model_validate_json(self._request("GET", path).content)

    def workflow_diff(
        self: _Requests, name: str, from_version: int, to_version: int
    ) -> WorkflowDiff:
        """A unified diff of two versions' definitions (as sorted, indented JSON)."""
        params = {"from": from_version, "to": to_version}
        response = self._request("GET", f"/v1/workflows/{name}/diff", params=params)
        return WorkflowDiff.model_validate_json(response.content)

    # --- schedules ----------------------------------------------------------------------------
    def create_schedule(self: _Requests, spec: Mapping[str, Any]) -> ScheduleView:
        response = self._request("POST", "/v1/schedules", json=dict(spec))
        return ScheduleView.model_validate_json(response.content)

    def schedules(self: _Requests) -> builtins.list[ScheduleView]:
        body = self._request("GET", "/v1/schedules").content
        return ScheduleList.model_validate_json(body).schedules

    def schedule(self: _Requests, schedule_id: str) -> ScheduleView:
        body = self._request("GET", f"/v1/schedules/{schedule_id}").content
        return ScheduleView.model_validate_json(body)

    def update_schedule(self: _Requests, schedule_id: str, **change: Any) -> ScheduleView:
        """Change fields (``enabled=False`` pauses, ``enabled=True`` resumes)."""
        response = self._request("PATCH", f"/v1/schedules/{schedule_id}", json=change)
        return ScheduleView.model_validate_json(response.content)

    def delete_schedule(self: _Requests, schedule_id: str) -> None:
        self._request("DELETE", f"/v1/schedules/{schedule_id}")

    def run_schedule(
        self: _Requests, schedule_id: str, idempotency_key: str | None = None
    ) -> SubmitResponse:
        """Start one run of the schedule now (202: the run's job, queued)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        response = self._request("POST", f"/v1/schedules/{schedule_id}/run", headers=headers)
        return SubmitResponse.model_validate_json(response.content)

    def pin_baseline(self: _Requests, schedule_id: str, job_id: str | None) -> ScheduleView:
        """Compare the schedule's monitor runs with ``job_id`` (None: the last good run)."""
        path = f"/v1/schedules/{schedule_id}/baseline"
        response = self._request("PUT", path, json={"job_id": job_id})
        return ScheduleView.model_validate_json(response.content)

    def schedule_runs(self: _Requests, schedule_id: str, limit: int = 20) -> ScheduleRuns:
        """The jobs a schedule made, newest first, each with its scheduled time."""
        path = f"/v1/schedules/{schedule_id}/runs"
        return ScheduleRuns.model_validate_json(
            self._request("GET", path, params={"limit": limit}).content
        )

    # --- fleet figures ------------------------------------------------------------------------
    def stats(self: _Requests, window_s: int = 3600) -> FleetStatsView:
        body = self._request("GET", "/v1/stats", params={"window_s": window_s}).content
        return FleetStatsView.model_validate_json(body)
