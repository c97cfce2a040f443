"""What the worker smoke run checks once the sandboxed worker is up: one job end to end
(its result, screenshot and video in S3), and that IAM refused none of its calls."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from smoke_specs import SmokeFailed


def check_job(
    services: Any, local: Any, page: str, pool: str, timeout_s: float, worker: Any
) -> None:
    """One job through the sandboxed worker: succeeded, the title extracted, a PNG and a WebM
    in S3."""

    from pagefleet.jobs.models import JobRequest
    from pagefleet.jobs.service import get_job, submit_job
    from pagefleet.jobs.states import JobStatus

    request = JobRequest.model_validate(
        {
            "pool": pool,
            "steps": [
                {"action": "goto", "url": page},
                {"action": "extract", "name": "title", "selector": "h1"},
                {"action": "screenshot", "name": "page.png"},
            ],
            "options": {"video": True},
        }
    )
    job = submit_job(services, "smoke", request).job
    print(f"job {job.job_id} submitted to pool {pool}")
    deadline = time.monotonic() + timeout_s
    while not job.status.is_final:
        if worker.poll() is not None:
            raise SmokeFailed(f"the worker exited ({worker.returncode})")
        if time.monotonic() > deadline:
            raise SmokeFailed(f"job still {job.status.value} after {timeout_s} s")
        time.sleep(0.5)
        job = get_job(services, "smoke", job.job_id)
    if job.status is not JobStatus.SUCCEEDED:
        raise SmokeFailed(f"job {job.status.value}: {job.error}")
    result = job.result or {}
    print(f"job succeeded: result {json.dumps(result)[:200]}")
    if "pagefleet smoke" not in json.dumps(result):
        raise SmokeFailed("the extracted title is not in the result")
    body = stored_artifact(local, job, "page.png")
    if not body.startswith(b"\x89PNG"):
        raise SmokeFailed("no PNG screenshot in the artifacts bucket")
    print(f"screenshot: {len(body)} bytes in s3://{local.artifacts_bucket}")
    video = stored_artifact(local, job, "video.webm")
    if not video.startswith(b"\x1a\x45\xdf\xa3"):
        raise SmokeFailed("no WebM video in the artifacts bucket (options.video)")
    print(f"video: {len(video)} bytes, recorded with the image's ffmpeg path")


def stored_artifact(local: Any, job: Any, name: str) -> bytes:
    """The job's artifact ``name`` as S3 holds it (empty when the job has none)."""
    import boto3

    found = [a for a in job.artifacts if a.name == name]
    if not found:
        return b""
    s3 = boto3.client("s3")
    return bytes(s3.get_object(Bucket=local.artifacts_bucket, Key=found[0].key)["Body"].read())


def check_iam(report: dict[str, Any], out: Path | None, summary: Any) -> None:
    """Nothing the worker did was refused by the template's policies."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report))
    print(summary(report))
    for denial in report["denied"]:
        print(f"  DENIED {denial['principal']}: {denial['action']} on {denial['resource']}")
    if report["denied"]:
        raise SmokeFailed("IAM refused calls the worker made (see above)")
