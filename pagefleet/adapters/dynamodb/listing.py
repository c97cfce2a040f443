"""A tenant's jobs, a page at a time, newest first (the job store's listing query)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pagefleet.adapters.dynamodb.codec import (
    deserialize,
    filter_expression,
    item_to_record,
    listing_key,
    serialize,
    status_pk,
    tenant_pk,
)
from pagefleet.jobs.listing import fill_page
from pagefleet.jobs.ports import NO_FILTER, JobFilter
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class JobListing:
    _db: DynamoDBClient
    _table: str

    def list_page(
        self,
        tenant_id: str,
        *,
        status: JobStatus | None,
        limit: int,
        start_key: dict[str, Any] | None,
        where: JobFilter = NO_FILTER,
    ) -> tuple[list[JobRecord], dict[str, Any] | None]:
        """Newest first. With a status, reads the by_status index so pages stay full; the
        other filters are a FilterExpression, read on while matches are few (``fill_page``)."""
        kwargs: dict[str, Any] = {"TableName": self._table, "ScanIndexForward": False}
        values: dict[str, Any]
        if status is None:
            kwargs["KeyConditionExpression"] = "pk = :pk AND begins_with(sk, :job)"
            values = {":pk": tenant_pk(tenant_id), ":job": "JOB#"}
        else:
            kwargs["IndexName"] = "by_status"
            kwargs["KeyConditionExpression"] = "status_pk = :sp"
            values = {":sp": status_pk(tenant_id, status)}
        condition, names, filter_values = filter_expression(where)
        if condition:
            kwargs["FilterExpression"] = condition
            kwargs["ExpressionAttributeNames"] = names
            values.update(filter_values)
        kwargs["ExpressionAttributeValues"] = serialize(values)

        def read(size: int, start: dict[str, Any] | None) -> tuple[list[JobRecord], Any]:
            extra: dict[str, Any] = {"ExclusiveStartKey": serialize(start)} if start else {}
            resp = self._db.query(**kwargs, Limit=size, **extra)
            jobs = [item_to_record(item) for item in resp.get("Items", [])]
            last = resp.get("LastEvaluatedKey")
            return [j for j in jobs if where.matches(j)], (deserialize(last) if last else None)

        return fill_page(
            read,
            limit=limit,
            start_key=start_key,
            filtered=bool(where),
            key_of=lambda job: listing_key(tenant_id, job.job_id, status),
        )
