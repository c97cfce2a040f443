"""The restore drill: scripts/restore_table.py against the embedded AWS (as far as moto goes),
and the stack switched to a restored table."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import boto3
import pytest

from devstack.provision import create_all
from pagefleet.specs.resources import JOBS_TABLE

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "scripts"))

import restore_table  # noqa: E402

pytestmark = pytest.mark.infra


@pytest.fixture
def jobs_table(moto_endpoint: str) -> str:
    ddb = boto3.client("dynamodb")
    provisioned = create_all(
        ddb, boto3.client("sqs"), boto3.client("s3"), prefix=f"r{uuid.uuid4().hex[:6]}-"
    )
    name = provisioned.jobs_table
    ddb.update_continuous_backups(
        TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
    )
    ddb.update_table(TableName=name, DeletionProtectionEnabled=True)
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "stage", "Value": "prod"}])
    for n in range(3):
        ddb.put_item(
            TableName=name,
            Item={"pk": {"S": "TENANT#acme"}, "sk": {"S": f"JOB#{n}"}, "status": {"S": "queued"}},
        )
    return name


def _settings(ddb, name: str) -> dict:  # type: ignore[no-untyped-def]
    table = ddb.describe_table(TableName=name)["Table"]
    return {
        "pitr": ddb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"][
            "PointInTimeRecoveryDescription"
        ]["PointInTimeRecoveryStatus"],
        "ttl": ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"].get(
            "AttributeName"
        ),
        "stream": (table.get("StreamSpecification") or {}).get("StreamViewType"),
        "indexes": sorted(i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])),
        "protected": table.get("DeletionProtectionEnabled", False),
        "tags": ddb.list_tags_of_resource(ResourceArn=table["TableArn"])["Tags"],
    }


def test_pitr_restore_gives_a_table_like_the_original(jobs_table, capsys) -> None:
    ddb = boto3.client("dynamodb")
    target = f"{jobs_table}-restored"
    assert (
        restore_table.main(
            ["--source", jobs_table, "--target", target, "--wait", "--count"], ddb=ddb
        )
        == 0
    )
    out = capsys.readouterr().out
    assert '"items": 3' in out and "restored_tables" in out
    assert _settings(ddb, target) == _settings(ddb, jobs_table)
    assert _settings(ddb, target)["indexes"] == sorted(i.name for i in JOBS_TABLE.indexes)
    item = ddb.get_item(TableName=target, Key={"pk": {"S": "TENANT#acme"}, "sk": {"S": "JOB#1"}})[
        "Item"
    ]
    assert item["status"] == {"S": "queued"}
    # The source is untouched.
    assert restore_table.count_items(ddb, jobs_table) == 3


def test_restore_from_a_backup(jobs_table) -> None:
    ddb = boto3.client("dynamodb")
    backup = ddb.create_backup(TableName=jobs_table, BackupName="drill")["BackupDetails"]
    ddb.delete_item(TableName=jobs_table, Key={"pk": {"S": "TENANT#acme"}, "sk": {"S": "JOB#0"}})
    summary = restore_table.restore(
        ddb,
        source=jobs_table,
        target=f"{jobs_table}-from-backup",
        backup_arn=backup["BackupArn"],
        count=True,
        poll_s=0.1,
    )
    assert summary["items"] == 3  # the deleted item is back
    assert "point-in-time recovery on" in summary["applied"]


@pytest.mark.slow
def test_the_stack_switches_to_a_restored_table(tmp_path) -> None:
    from aws_cdk import App, Stack, aws_iam
    from aws_cdk.assertions import Template

    from infra import grants
    from infra.config import STAGES
    from infra.constructs.job_store import JobStore

    restored = "pagefleet-prod-jobs-restored-20261130"
    config = STAGES["prod"].model_validate(
        {**STAGES["prod"].model_dump(), "restored_tables": {"JobsTable": restored}}
    )
    stack = Stack(App(outdir=str(tmp_path)), "restored")
    store = JobStore(stack, "JobStore", retain=True, restored=config.restored_tables)
    role = aws_iam.Role(stack, "R", assumed_by=aws_iam.ServicePrincipal("lambda.amazonaws.com"))
    grants.table(role, store.jobs, grants.JOBS_API)
    template = Template.from_stack(stack)
    tables = template.find_resources("AWS::DynamoDB::Table")
    assert len(tables) == 2  # only the tenants and usage tables are the stack's own now
    text = str(template.to_json())
    assert f"table/{restored}" in text and f"table/{restored}/index/*" in text
    with pytest.raises(ValueError, match="unknown tables"):
        STAGES["prod"].model_validate(
            {**STAGES["prod"].model_dump(), "restored_tables": {"Jobs": "x"}}
        )
