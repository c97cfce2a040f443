"""S3 artifact store: tenant/job/attempt keys, sha256 recorded, presigned reads."""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pagefleet.jobs.record import Artifact
from pagefleet.specs.resources import ARTIFACTS_BUCKET, ROUTINE

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def artifact_key(tenant_id: str, job_id: str, attempt: int, name: str) -> str:
    # Tenant first, so one prefix holds everything a tenant owns (export, deletion, IAM).
    return f"{tenant_id}/{job_id}/{attempt}/{name}"


class S3ArtifactStore:
    def __init__(self, client: S3Client, bucket: str) -> None:
        self._s3 = client
        self._bucket = bucket

    def put(
        self,
        *,
        tenant_id: str,
        job_id: str,
        attempt: int,
        name: str,
        data: bytes,
        content_type: str,
        retention: str = ROUTINE,
        correlation_id: str | None = None,
    ) -> Artifact:
        """Upload one artifact.

        The key is fixed per attempt, so a duplicate delivery rewrites the same object.
        """
        key = artifact_key(tenant_id, job_id, attempt, name)
        digest = hashlib.sha256(data).hexdigest()
        metadata = {"sha256": digest}
        if correlation_id:
            metadata["correlation-id"] = correlation_id
        self._s3.put_object(
            Bucket=self._bucket,
            Key=key,
            Body=data,
            ContentType=content_type,
            ChecksumSHA256=_b64_sha256(data),
            Tagging=f"{ARTIFACTS_BUCKET.retention_tag}={quote(retention)}",
            Metadata=metadata,
        )
        return Artifact(
            name=name,
            key=key,
            size=len(data),
            content_type=content_type,
            sha256=digest,
            retention=retention,
            attempt=attempt,
        )

    def presign_get(self, key: str, ttl_seconds: int, download_name: str | None = None) -> str:
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": key}
        if download_name:
            params["ResponseContentDisposition"] = f'attachment; filename="{download_name}"'
        return str(
            self._s3.generate_presigned_url("get_object", Params=params, ExpiresIn=ttl_seconds)
        )

    def get(self, key: str) -> bytes:
        return bytes(self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read())


def _b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()
