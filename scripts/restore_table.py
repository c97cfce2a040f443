"""Restore a pagefleet table into a new table, made like the original: docs/runbooks.md,
"Restore a table".

    .venv/bin/python scripts/restore_table.py --source pagefleet-prod-JobsTable... \\
        --target pagefleet-prod-jobs-restored-20261130 --time 2026-11-30T09:15:00Z --wait
    .venv/bin/python scripts/restore_table.py --source ... --target ... --backup-arn ARN

From point-in-time recovery (``--time``, or the latest restorable time without it) or from
a DynamoDB backup ARN (AWS Backup's recovery points of DynamoDB tables are such ARNs unless
the vault uses advanced DynamoDB backups). A restore copies the items, keys and indexes but
not the table's settings, so with ``--wait`` the script then applies the source's: point-in-
time recovery, TTL, stream, deletion protection and tags. It never touches the source.
Credentials and region come from the usual AWS environment (``AWS_ENDPOINT_URL`` too).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

import boto3


def _describe(ddb: Any, name: str) -> dict[str, Any]:
    return dict(ddb.describe_table(TableName=name)["Table"])


def start_restore(
    ddb: Any,
    *,
    source: str,
    target: str,
    at: datetime | None = None,
    backup_arn: str | None = None,
) -> dict[str, Any]:
    """Start the restore into ``target`` (which must not exist); returns its description."""
    if backup_arn:
        response = ddb.restore_table_from_backup(TargetTableName=target, BackupArn=backup_arn)
    else:
        when: dict[str, Any] = (
            {"RestoreDateTime": at} if at is not None else {"UseLatestRestorableTime": True}
        )
        response = ddb.restore_table_to_point_in_time(
            SourceTableName=source,
            TargetTableName=target,
            BillingModeOverride="PAY_PER_REQUEST",
            **when,
        )
    return dict(response["TableDescription"])


def wait_active(ddb: Any, name: str, *, timeout_s: float = 6 * 3600, poll_s: float = 10) -> None:
    """Large tables take hours to restore; this waits as long as it takes, up to timeout_s."""
    deadline = time.monotonic() + timeout_s
    while _describe(ddb, name)["TableStatus"] != "ACTIVE":
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} is not ACTIVE after {timeout_s:.0f} s")
        time.sleep(poll_s)


def make_like(ddb: Any, *, source: str, target: str) -> list[str]:
    """Apply the source table's settings that a restore does not copy; returns what it did."""
    done: list[str] = []
    src = _describe(ddb, source)
    dst = _describe(ddb, target)
    ddb.update_continuous_backups(
        TableName=target,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    done.append("point-in-time recovery on")
    ttl = ddb.describe_time_to_live(TableName=source)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
        ddb.update_time_to_live(
            TableName=target,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
        )
        done.append(f"TTL on {ttl['AttributeName']}")
    stream = src.get("StreamSpecification") or {}
    if stream.get("StreamEnabled") and not (dst.get("StreamSpecification") or {}).get(
        "StreamEnabled"
    ):
        ddb.update_table(
            TableName=target,
            StreamSpecification={"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]},
        )
        done.append(f"stream {stream['StreamViewType']}")
    if src.get("DeletionProtectionEnabled"):
        ddb.update_table(TableName=target, DeletionProtectionEnabled=True)
        done.append("deletion protection on")
    tags = [
        t
        for t in ddb.list_tags_of_resource(ResourceArn=src["TableArn"]).get("Tags", [])
        if not t["Key"].startswith("aws:")
    ]
    if tags:
        ddb.tag_resource(ResourceArn=dst["TableArn"], Tags=tags)
        done.append(f"{len(tags)} tags")
    return done


def count_items(ddb: Any, name: str) -> int:
    """An exact count (a scan): ItemCount in describe_table lags by hours."""
    total = 0
    for page in ddb.get_paginator("scan").paginate(TableName=name, Select="COUNT"):
        total += int(page["Count"])
    return total


def restore(
    ddb: Any,
    *,
    source: str,
    target: str,
    at: datetime | None = None,
    backup_arn: str | None = None,
    wait: bool = True,
    count: bool = False,
    poll_s: float = 10,
) -> dict[str, Any]:
    started = start_restore(ddb, source=source, target=target, at=at, backup_arn=backup_arn)
    summary: dict[str, Any] = {
        "source": source,
        "target": target,
        "from": backup_arn or (at.isoformat() if at else "latest restorable time"),
        "status": started.get("TableStatus"),
    }
    if not wait:
        return summary
    wait_active(ddb, target, poll_s=poll_s)
    summary["status"] = "ACTIVE"
    summary["applied"] = make_like(ddb, source=source, target=target)
    summary["table_arn"] = _describe(ddb, target)["TableArn"]
    if count:
        summary["items"] = count_items(ddb, target)
    summary["next"] = (
        "switch the stack: add to the stage's settings in pagefleet.deploy.json "
        f'"restored_tables": {{"<JobsTable|TenantsTable|UsageTable>": "{target}"}}, '
        "then cdk deploy (docs/runbooks.md#restore-a-table)"
    )
    return summary


def _utc(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def main(argv: list[str] | None = None, ddb: Any | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="the table to restore from")
    parser.add_argument("--target", required=True, help="a new table name")
    origin = parser.add_mutually_exclusive_group()
    origin.add_argument("--time", type=_utc, help="UTC time to restore (PITR), ISO 8601")
    origin.add_argument("--backup-arn", help="a DynamoDB backup ARN to restore instead")
    parser.add_argument("--wait", action="store_true", help="wait, then apply the settings")
    parser.add_argument("--count", action="store_true", help="count the restored items (scan)")
    args = parser.parse_args(argv)
    client = ddb or boto3.client("dynamodb")
    summary = restore(
        client,
        source=args.source,
        target=args.target,
        at=args.time,
        backup_arn=args.backup_arn,
        wait=args.wait,
        count=args.count,
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
