"""Python client for the pagefleet HTTPS API.

    with PagefleetClient("http://127.0.0.1:8080", api_key) as client:
        job = client.submit({"steps": [{"action": "goto", "url": "https://example.com"}]})
        done = client.wait(job.job_id)
        for artifact in client.artifacts(job.job_id):
            data = client.download_verified(artifact)

Every 4xx/5xx raises ``ApiError`` with the API's error code, message and field details.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import httpx

from pagefleet.api.jobs import (
    ArtifactInfo,
    ArtifactLink,
    ArtifactList,
    DeadLetters,
    EventPage,
    JobPage,
    JobView,
    RedriveResponse,
    SubmitResponse,
    ValidationResult,
)
from pagefleet.api.live import LiveInfo, LiveTicket
from pagefleet.api.meta import HealthView
from pagefleet.api.notify import DeliveryList, NotifySettings, SigningSecret
from pagefleet.client.browsing import BrowsingCalls
from pagefleet.client.dispatch import DispatchCalls
from pagefleet.client.errors import ApiError
from pagefleet.client.retries import Retries, is_safe
from pagefleet.client.takeover import TakeoverCalls
from pagefleet.client.tenancy import TenancyCalls
from pagefleet.client.tls import tls_context
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.submission import JobSubmission
from pagefleet.monitors.changes import CHANGES_ARTIFACT, Changes

if TYPE_CHECKING:
    from pagefleet.client.follow import FollowItem
    from pagefleet.notify.ports import DeliveryAttempt

DEFAULT_TIMEOUT_S = 30.0


class ChecksumMismatch(Exception):
    """A downloaded artifact's sha256 differs from the one recorded for it."""


# The API's contract models are the client's: one declaration for both sides.
Job = JobView
JobList = JobPage
ArtifactLinks = list[ArtifactLink]
__all__ = [
    "ApiError",
    "ArtifactInfo",
    "ArtifactLink",
    "ArtifactLinks",
    "ChecksumMismatch",
    "Job",
    "JobList",
    "PagefleetClient",
    "Retries",
]


class PagefleetClient(DispatchCalls, TenancyCalls, BrowsingCalls, TakeoverCalls):
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        retries: Retries | None = None,
    ) -> None:
        """``retries``: when a request is sent again (pagefleet.client.retries; three sends
        at most by default, ``Retries(attempts=1)`` never again)."""
        headers = {"User-Agent": "pagefleet-client/0.1", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or ""
        self.timeout = timeout
        self.retries = retries or Retries()
        # trust_env=False: never route through a proxy from the environment (the local stack
        # is on loopback, and a presigned URL carries its own credentials).
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            transport=transport,
            trust_env=False,
            verify=tls_context(),
        )
        self._downloads = httpx.Client(
            timeout=timeout, transport=transport, trust_env=False, verify=tls_context()
        )

    # --- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close the HTTP connections (``with PagefleetClient(...)`` does it on exit)."""
        self._http.close()
        self._downloads.close()

    def __enter__(self) -> PagefleetClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- calls -------------------------------------------------------------------------------
    def _request(
        self, method: str, path: str, *, safe: bool = False, **kwargs: Any
    ) -> httpx.Response:
        """``safe``: the call may run twice (beside what its method and key say)."""
        safe = safe or is_safe(method, kwargs.get("headers"))
        response = self.retries.send(lambda: self._http.request(method, path, **kwargs), safe=safe)
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        return response

    def submit(
        self,
        request: JobRequest | JobSubmission | Mapping[str, Any],
        idempotency_key: str | None = None,
        *,
        correlation_id: str | None = None,
    ) -> Job:
        """Submit a job; the API answers 202 with the queued job (or the replayed one)."""
        body = (
            request.model_dump(mode="json", exclude_none=True)
            if isinstance(request, JobRequest | JobSubmission)
            else dict(request)
        )
        headers = {}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        if correlation_id is not None:
            headers["X-Correlation-Id"] = correlation_id
        response = self._request("POST", "/v1/jobs", json=body, headers=headers)
        return SubmitResponse.model_validate_json(response.content).job

    def get(self, job_id: str) -> Job:
        return Job.model_validate_json(self._request("GET", f"/v1/jobs/{job_id}").content)

    def list(
        self,
        status: JobStatus | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        *,
        name: str | None = None,
        workflow: str | None = None,
        schedule_id: str | None = None,
    ) -> JobList:
        """A page of jobs, newest first; the filters combine. With ``name`` (the job's),
        ``workflow`` (a named workflow, any version) or ``schedule_id`` a page may hold fewer
        than ``limit`` jobs and still have a ``next_cursor``: read on while it has one."""
        given = {
            "status": str(status) if status is not None else None,
            "limit": limit,
            "cursor": cursor,
            "name": name,
            "workflow": workflow,
            "schedule_id": schedule_id,
        }
        params = {k: v for k, v in given.items() if v is not None}
        return JobList.model_validate_json(self._request("GET", "/v1/jobs", params=params).content)

    def iter_jobs(
        self,
        status: JobStatus | str | None = None,
        page_size: int = 100,
        *,
        name: str | None = None,
        workflow: str | None = None,
        schedule_id: str | None = None,
    ) -> Iterator[Job]:
        """Every job ``list`` would page through, reading the next page as it goes."""
        cursor: str | None = None
        while True:
            page = self.list(
                status=status,
                limit=page_size,
                cursor=cursor,
                name=name,
                workflow=workflow,
                schedule_id=schedule_id,
            )
            yield from page.jobs
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def validate(self, request: JobRequest | JobSubmission | Mapping[str, Any]) -> ValidationResult:
        """What ``submit`` would refuse in ``request``, every problem with its field; nothing
        is submitted."""
        body = (
            request.model_dump(mode="json", exclude_none=True)
            if isinstance(request, JobRequest | JobSubmission)
            else dict(request)
        )
        response = self._request("POST", "/v1/jobs/validate", json=body)
        return ValidationResult.model_validate_json(response.content)

    def health(self) -> HealthView:
        """The deployed release and stage (``GET /v1/health``: needs no API key)."""
        return HealthView.model_validate_json(self._request("GET", "/v1/health").content)

    def workflow_schema(self) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of a job request."""
        schema: dict[str, Any] = self._request("GET", "/v1/workflow.schema.json").json()
        return schema

    def cancel(self, job_id: str) -> Job:
        """Cancel a job: queued ones at once; running ones stop within seconds."""
        # Cancelling twice is cancelling once: safe to send again.
        response = self._request("POST", f"/v1/jobs/{job_id}/cancel", safe=True)
        return Job.model_validate_json(response.content)

    def resolve(
        self, job_id: str, outcome: Literal["done", "not_done"], *, continue_: bool = False
    ) -> Job:
        """Resolve a job in needs_review: ``done`` (its irreversible step took effect: it
        ends succeeded, or with ``continue_`` runs the steps after it) or ``not_done`` (it
        runs again from the start). ``ApiError`` 409 when the job is not in review."""
        body = {"outcome": outcome, "continue": continue_}
        response = self._request("POST", f"/v1/jobs/{job_id}/resolve", json=body)
        return Job.model_validate_json(response.content)

    def continue_job(self, job_id: str, *, note: str | None = None) -> Job:
        """Continue a job waiting_for_human (its await_human step): the person is done, and
        its worker resumes it in the same browser. ``ApiError`` 409 when it is not waiting."""
        body = {} if note is None else {"note": note}
        response = self._request("POST", f"/v1/jobs/{job_id}/continue", json=body)
        return Job.model_validate_json(response.content)

    def replay(self, job_id: str) -> Job:
        """Replay an ended job offline, against its recorded traffic (``har.zip``) only: a
        new job (its ``replay_of`` is ``job_id``). ``ApiError`` 409 when the job has not
        ended, 422 when it has no HAR."""
        response = self._request("POST", f"/v1/jobs/{job_id}/replay", json={"offline": True})
        return SubmitResponse.model_validate_json(response.content).job

    def dead_letters(self) -> builtins.list[Job]:
        """Dead-lettered jobs of every tenant (admin key)."""
        response = self._request("GET", "/v1/admin/dead-letters")
        return list(DeadLetters.model_validate_json(response.content).dead_letters)

    def redrive(self, jobs: builtins.list[str] | None = None) -> builtins.list[str]:
        """Send dead-lettered jobs ("tenant_id/job_id"; None = all) back to their queue."""
        body: dict[str, Any] = {} if jobs is None else {"jobs": jobs}
        response = self._request("POST", "/v1/admin/dead-letters/redrive", json=body)
        return RedriveResponse.model_validate_json(response.content).redriven

    def artifacts(self, job_id: str) -> ArtifactLinks:
        response = self._request("GET", f"/v1/jobs/{job_id}/artifacts")
        return ArtifactList.model_validate_json(response.content).artifacts

    def result(self, job: Job) -> dict[str, Any] | None:
        """The job's result: inline, or (too large for the record) read from its artifact."""
        if job.result is not None or job.result_artifact is None:
            return job.result
        link = next(a for a in self.artifacts(job.job_id) if a.name == job.result_artifact)
        data: dict[str, Any] = json.loads(self.download_verified(link))
        return data

    def changes(self, job_id: str, *, full: bool = True) -> Changes | None:
        """A monitor's run against its baseline (None: the job is no monitor's run, or has
        not ended). The job view cuts long lists; ``full`` reads ``changes.json`` then."""
        found = self.get(job_id).changes
        if found is None or not full or not any(c.truncated for c in found.records.values()):
            return found
        link = next((a for a in self.artifacts(job_id) if a.name == CHANGES_ARTIFACT), None)
        return found if link is None else Changes.model_validate_json(self.download_verified(link))

    def wait(self, job_id: str, timeout: float = 300.0, poll: float = 0.5) -> Job:
        """Poll until the job is final, or in needs_review (nothing happens to it until a
        person resolves it); raises TimeoutError (with the last status) otherwise."""
        deadline = time.monotonic() + timeout
        delay = min(poll, 0.2)
        while True:
            job = self.get(job_id)
            if job.is_final or job.status is JobStatus.NEEDS_REVIEW:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} still {job.status.value} after {timeout:.0f}s")
            time.sleep(delay)
            delay = min(delay * 1.5, poll)

    # --- live runs and notifications ---------------------------------------------------------
    def events(self, job_id: str, after: int = 0, limit: int = 100) -> EventPage:
        """The job's run events after ``after`` (a seq), in order; ``more`` if there are more."""
        params = {"after": after, "limit": limit}
        response = self._request("GET", f"/v1/jobs/{job_id}/events", params=params)
        return EventPage.model_validate_json(response.content)

    def follow(
        self,
        job_id: str,
        *,
        after: int = 0,
        timeout: float | None = None,
        live: bool = True,
        poll_s: float = 1.0,
    ) -> Iterator[FollowItem]:
        """The job's events and status changes as they happen, until it ends (the last item
        is its final ``StatusUpdate``). WebSocket when it can, polling otherwise."""
        from pagefleet.client.follow import follow  # +0.03 s on import, for followers only

        return follow(self, job_id, after=after, timeout=timeout, live=live, poll_s=poll_s)

    def follow_async(
        self,
        job_id: str,
        *,
        after: int = 0,
        timeout: float | None = None,
        live: bool = True,
        poll_s: float = 1.0,
    ) -> AsyncIterator[FollowItem]:
        """``follow`` for asyncio: ``async for item in client.follow_async(job_id)``."""
        from pagefleet.client.follow_async import follow_async  # as follow

        return follow_async(
            self.base_url,
            self.api_key,
            job_id,
            error=ApiError.from_response,
            after=after,
            timeout=timeout,
            live=live,
            poll_s=poll_s,
            request_timeout=self.timeout,
        )

    def live_info(self) -> LiveInfo:
        return LiveInfo.model_validate_json(self._request("GET", "/v1/live").content)

    def live_ticket(self) -> LiveTicket:
        """A single-use, 60-second ticket to open the WebSocket without a header."""
        return LiveTicket.model_validate_json(self._request("POST", "/v1/live/tickets").content)

    def deliveries(self, job_id: str) -> builtins.list[DeliveryAttempt]:
        response = self._request("GET", f"/v1/jobs/{job_id}/deliveries")
        return list(DeliveryList.model_validate_json(response.content).deliveries)

    def default_webhook(self) -> str | None:
        return NotifySettings.model_validate_json(
            self._request("GET", "/v1/notifications").content
        ).webhook

    def set_default_webhook(self, url: str | None) -> str | None:
        response = self._request("PUT", "/v1/notifications", json={"webhook": url})
        return NotifySettings.model_validate_json(response.content).webhook

    def signing_secret(self, *, rotate: bool = False) -> str:
        """The tenant's webhook signing secret (a new one with ``rotate``)."""
        path = "/v1/notifications/signing-secret"
        response = self._request("POST", f"{path}/rotate") if rotate else self._request("GET", path)
        return SigningSecret.model_validate_json(response.content).secret

    def download(self, url: str) -> bytes:
        """Fetch a presigned artifact URL (no API key is sent to the storage endpoint)."""
        response = self._downloads.get(url)
        if response.status_code == 403 and b"Request has expired" in response.content:
            # A presigned link lasts its expires_in seconds (S3 refuses it after them).
            raise ApiError(
                403,
                "link_expired",
                "the artifact's link ran out: list the job's artifacts again for fresh links",
            )
        if response.status_code >= 400:
            raise ApiError(
                response.status_code, "download_failed", f"GET artifact: {response.reason_phrase}"
            )
        return response.content

    def download_verified(self, artifact: ArtifactLink) -> bytes:
        """``download`` an artifact and check it against its recorded sha256
        (``ChecksumMismatch`` when it differs)."""
        data = self.download(artifact.url)
        digest = hashlib.sha256(data).hexdigest()
        if digest != artifact.sha256:
            raise ChecksumMismatch(
                f"artifact {artifact.name}: sha256 {digest} differs from recorded {artifact.sha256}"
            )
        return data
