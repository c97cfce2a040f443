"""The Python client's tenancy calls: limits, usage, batches, deletion, sessions, audit.

Mixed into ``pagefleet.client.PagefleetClient``; parses the API's answers with the same
models the API serializes (``pagefleet.tenancy.views``).
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import httpx

from pagefleet.api.batches import BatchResponse
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.submission import JobSubmission
from pagefleet.tenancy.views import (
    AuditPage,
    Deleted,
    JobUsage,
    SessionInfoView,
    SessionList,
    TenantsUsage,
    TenantView,
    UsageReport,
)


class _Requests(Protocol):
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...


def _period(first: str | None, last: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if first:
        params["from"] = first
    if last:
        params["to"] = last
    return params


def _renamed(old: str, new: str) -> None:
    warnings.warn(
        f"PagefleetClient.{old} is {new}: saved logins are named apart from browser sessions",
        DeprecationWarning,
        stacklevel=3,
    )


class TenancyCalls:
    # --- the caller's own -----------------------------------------------------------------------
    def tenant(self: _Requests) -> TenantView:
        """The caller's limits and what it uses right now."""
        return TenantView.model_validate_json(self._request("GET", "/v1/tenant").content)

    def usage(self: _Requests, first: str | None = None, last: str | None = None) -> UsageReport:
        """Usage and cost per day and workflow (UTC days; default: the month so far)."""
        response = self._request("GET", "/v1/usage", params=_period(first, last))
        return UsageReport.model_validate_json(response.content)

    def job_usage(self: _Requests, job_id: str) -> JobUsage:
        return JobUsage.model_validate_json(
            self._request("GET", f"/v1/jobs/{job_id}/usage").content
        )

    def delete(self: _Requests, job_id: str) -> Deleted:
        """Delete a job, its events and artifacts (a running one is cancelled first)."""
        return Deleted.model_validate_json(self._request("DELETE", f"/v1/jobs/{job_id}").content)

    def submit_batch(
        self: _Requests,
        jobs: Sequence[JobRequest | JobSubmission | Mapping[str, Any]],
        idempotency_keys: Sequence[str | None] | None = None,
    ) -> BatchResponse:
        """Up to 100 jobs; each is answered on its own (``results[i].status``)."""
        keys = idempotency_keys or [None] * len(jobs)
        items = []
        for job, key in zip(jobs, keys, strict=True):
            body = (
                job.model_dump(mode="json", exclude_none=True)
                if isinstance(job, JobRequest | JobSubmission)
                else dict(job)
            )
            items.append({"job": body, **({"idempotency_key": key} if key else {})})
        response = self._request("POST", "/v1/batches", json={"jobs": items})
        return BatchResponse.model_validate_json(response.content)

    def saved_logins(self: _Requests) -> builtins.list[SessionInfoView]:
        """The tenant's saved logins (what ``save_session`` steps saved; ``/v1/sessions``)."""
        return SessionList.model_validate_json(
            self._request("GET", "/v1/sessions").content
        ).sessions

    def delete_saved_login(self: _Requests, name: str) -> None:
        """Delete a saved login by its name."""
        self._request("DELETE", f"/v1/sessions/{name}")

    def sessions(self: _Requests) -> builtins.list[SessionInfoView]:
        """Deprecated: ``saved_logins`` (these are saved logins, not browser sessions)."""
        _renamed("sessions", "saved_logins")
        return TenancyCalls.saved_logins(self)

    def delete_session(self: _Requests, name: str) -> None:
        """Deprecated: ``delete_saved_login`` (a saved login, not a browser session)."""
        _renamed("delete_session", "delete_saved_login")
        TenancyCalls.delete_saved_login(self, name)

    # --- admin key ------------------------------------------------------------------------------
    def tenant_of(self: _Requests, tenant_id: str) -> TenantView:
        response = self._request("GET", f"/v1/admin/tenants/{tenant_id}")
        return TenantView.model_validate_json(response.content)

    def set_limits(self: _Requests, tenant_id: str, **limits: Any) -> TenantView:
        """Change a tenant's limits (fields left out keep their value; ``reset=[names]``)."""
        response = self._request("PATCH", f"/v1/admin/tenants/{tenant_id}/limits", json=limits)
        return TenantView.model_validate_json(response.content)

    def tenants_usage(
        self: _Requests, first: str | None = None, last: str | None = None
    ) -> TenantsUsage:
        response = self._request("GET", "/v1/admin/usage", params=_period(first, last))
        return TenantsUsage.model_validate_json(response.content)

    def audit(self: _Requests, limit: int = 50, before: str | None = None) -> AuditPage:
        params: dict[str, Any] = {"limit": limit, **({"before": before} if before else {})}
        response = self._request("GET", "/v1/admin/audit", params=params)
        return AuditPage.model_validate_json(response.content)
