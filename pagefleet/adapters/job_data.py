"""A job's data beyond its record's moves: artifacts in S3 and items in the jobs table, to
delete on request and to expire (``pagefleet.tenancy.retention``)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from pagefleet.adapters.dynamodb.batches import write_all
from pagefleet.adapters.dynamodb.codec import (
    condition_failed,
    deserialize,
    idempotency_sk,
    job_sk,
    serialize,
    tenant_pk,
    update_job_if,
)
from pagefleet.adapters.dynamodb.events import EVENTS_PREFIX, counter_sk
from pagefleet.jobs.states import JobStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client


def job_prefix(tenant_id: str, job_id: str) -> str:
    """Every attempt's artifacts (``pagefleet.adapters.s3.artifact_key``)."""
    return f"{tenant_id}/{job_id}/"


class AwsJobData:
    def __init__(self, dynamodb: DynamoDBClient, table: str, s3: S3Client, bucket: str) -> None:
        self._db = dynamodb
        self._table = table
        self._s3 = s3
        self._bucket = bucket

    def delete_artifacts(self, tenant_id: str, job_id: str) -> int:
        deleted = 0
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self._bucket, Prefix=job_prefix(tenant_id, job_id)
        )
        for page in pages:
            keys: Any = [{"Key": item["Key"]} for item in page.get("Contents", []) if "Key" in item]
            if not keys:
                continue
            answer = self._s3.delete_objects(
                Bucket=self._bucket, Delete={"Objects": keys, "Quiet": True}
            )
            errors = answer.get("Errors", [])
            if errors:
                raise RuntimeError(f"{len(errors)} artifacts were not deleted: {errors[0]}")
            deleted += len(keys)
        return deleted

    def delete_items(self, tenant_id: str, job_id: str, idempotency_key: str | None) -> int:
        """The record and every item kept under it (``JOB#<id>...``), its run events and
        their counter (``EVT#<id>#...``, ``EVTSEQ#<id>``), and its key."""
        pk = tenant_pk(tenant_id)
        keys: list[dict[str, Any]] = []
        for prefix in (job_sk(job_id), f"{EVENTS_PREFIX}{job_id}#", counter_sk(job_id)):
            keys += self._keys_under(pk, prefix)
        key_deleted = (
            0 if idempotency_key is None else self._delete_key(pk, idempotency_key, job_id)
        )
        # The record last: if anything fails before, the job can still be found and deleted.
        keys.sort(key=lambda k: k["sk"] == job_sk(job_id))
        write_all(self._db, self._table, [{"DeleteRequest": {"Key": serialize(k)}} for k in keys])
        return len(keys) + key_deleted

    def _delete_key(self, pk: str, idempotency_key: str, job_id: str) -> int:
        """The job's idempotency key, while it is still the job's: past its 24 h another
        submission may have taken it (pagefleet.jobs.ports.JobStore.create)."""
        try:
            self._db.delete_item(
                TableName=self._table,
                Key=serialize({"pk": pk, "sk": idempotency_sk(idempotency_key)}),
                ConditionExpression="job_id = :j",
                ExpressionAttributeValues=serialize({":j": job_id}),
            )
        except ClientError as exc:
            if condition_failed(exc):
                return 0  # another job's, or gone
            raise
        return 1

    def _keys_under(self, pk: str, prefix: str) -> list[dict[str, Any]]:
        keys: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": serialize({":pk": pk, ":prefix": prefix}),
            "ProjectionExpression": "pk, sk",
        }
        while True:
            resp = self._db.query(**kwargs)
            keys += [deserialize(item) for item in resp.get("Items", [])]
            if not resp.get("LastEvaluatedKey"):
                return keys
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def request_delete(self, tenant_id: str, job_id: str, at: str) -> None:
        with contextlib.suppress(ClientError):
            self._db.update_item(
                TableName=self._table,
                Key=serialize({"pk": tenant_pk(tenant_id), "sk": job_sk(job_id)}),
                UpdateExpression=(
                    "SET delete_requested_at = if_not_exists(delete_requested_at, :at)"
                ),
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=serialize({":at": at}),
            )

    def set_expiry(
        self, tenant_id: str, job_id: str, expires_at: int, *, status: JobStatus
    ) -> None:
        # Only while the job is still in the state that earned the expiry (not redriven,
        # not deleted meanwhile).
        update_job_if(
            self._db,
            self._table,
            tenant_id,
            job_id,
            "SET expires_at = :e",
            "#status = :s",
            {":e": expires_at, ":s": status.value},
        )

    def clear_expiry(self, tenant_id: str, job_id: str) -> None:
        update_job_if(
            self._db,
            self._table,
            tenant_id,
            job_id,
            "REMOVE expires_at",
            # Not while it is (again) dead-lettered or in review: those keep their expiry.
            "#status <> :dead AND #status <> :review",
            {":dead": JobStatus.DEAD_LETTERED.value, ":review": JobStatus.NEEDS_REVIEW.value},
        )
