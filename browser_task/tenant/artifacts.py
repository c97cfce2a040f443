"""Artifact uploads for one attempt: size-checked, started at once, awaited at the end.

Uploads run in threads while the page moves on to the next step, so a screenshot does not
hold up the workflow for an S3 round trip.
"""

from __future__ import annotations

import asyncio

from browser_task.errors import FailJob, JobFailure, RetryJob, first_line
from pagefleet.jobs.ports import ArtifactStore
from pagefleet.jobs.record import Artifact
from pagefleet.specs.resources import ROUTINE


def human_size(size: float) -> str:
    units = ("B", "KiB", "MiB", "GiB")
    index = 0
    while size >= 1024 and index < len(units) - 1:
        size /= 1024
        index += 1
    return f"{size:.0f} {units[index]}" if index == 0 else f"{size:.1f} {units[index]}"


class ArtifactCollector:
    def __init__(
        self,
        store: ArtifactStore,
        *,
        tenant_id: str,
        job_id: str,
        attempt: int,
        max_bytes: int,
        correlation_id: str | None = None,
    ) -> None:
        self._store = store
        self._correlation_id = correlation_id
        self._tenant_id = tenant_id
        self._job_id = job_id
        self._attempt = attempt
        self._max_bytes = max_bytes
        self._uploads: dict[str, asyncio.Task[Artifact]] = {}

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def names(self) -> list[str]:
        return list(self._uploads)

    def add(self, name: str, data: bytes, content_type: str, *, retention: str = ROUTINE) -> None:
        if len(data) > self._max_bytes:
            raise FailJob(
                f"artifact {name} is {human_size(len(data))}, over the "
                f"{human_size(self._max_bytes)} limit per artifact",
                kind="artifact_too_large",
            )
        if name in self._uploads:
            raise FailJob(
                f"artifact name {name} is used twice in this job", kind="invalid_workflow"
            )
        self._uploads[name] = asyncio.create_task(
            asyncio.to_thread(
                self._store.put,
                tenant_id=self._tenant_id,
                job_id=self._job_id,
                attempt=self._attempt,
                name=name,
                data=data,
                content_type=content_type,
                retention=retention,
                correlation_id=self._correlation_id,
            ),
            name=f"upload {name}",
        )

    async def uploaded(self, name: str) -> Artifact:
        """Wait for one upload (a browser session's screenshot, linked in its answer)."""
        try:
            return await asyncio.shield(self._uploads[name])
        except JobFailure:
            raise
        except Exception as exc:
            raise RetryJob(
                f"uploading artifact {name} failed: {first_line(str(exc))}",
                kind="artifact_upload_failed",
            ) from None

    async def collect(self) -> list[Artifact]:
        """Wait for every upload; the ones that made it, or RetryJob if any did not."""
        artifacts, _failure = await self.settle()
        if _failure is not None:
            raise _failure
        return artifacts

    async def settle(self) -> tuple[list[Artifact], RetryJob | None]:
        """Wait for every upload; never raises (for the failure path)."""
        if not self._uploads:
            return [], None
        results = await asyncio.gather(*self._uploads.values(), return_exceptions=True)
        artifacts: list[Artifact] = []
        failure: RetryJob | None = None
        for name, outcome in zip(self._uploads, results, strict=True):
            if isinstance(outcome, Artifact):
                artifacts.append(outcome)
            elif failure is None and isinstance(outcome, BaseException):
                failure = RetryJob(
                    f"uploading artifact {name} failed: {first_line(str(outcome))}",
                    kind="artifact_upload_failed",
                )
        return artifacts, failure

    def cancel(self) -> None:
        for task in self._uploads.values():
            task.cancel()
