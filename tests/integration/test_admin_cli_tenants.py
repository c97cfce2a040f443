"""`pagefleet admin create-key` makes a tenant only with an id the API takes: one the API's
routes would refuse, or whose role session name or secret names AWS would refuse, is
refused with the field and the rule, and nothing is stored."""

from __future__ import annotations

import boto3
import pytest

from devstack.provision import Provisioned
from pagefleet.cli import main
from pagefleet.cli.common import EXIT_USAGE


def keys_stored(table: str) -> list[str]:
    items = boto3.client("dynamodb").scan(TableName=table)["Items"]
    return [item["tenant_id"]["S"] for item in items if "tenant_id" in item]


@pytest.mark.parametrize("tenant", ["café", "١٢٣", "a" * 129, "acme corp", "acme/ops"])
def test_a_tenant_id_aws_names_would_refuse_is_refused_with_its_field(
    provisioned: Provisioned, tenant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    table = provisioned.tenants_table
    before = keys_stored(table)
    with pytest.raises(SystemExit) as exited:
        main(["admin", "create-key", "--tenant", tenant, "--tenants-table", table])
    assert exited.value.code == EXIT_USAGE
    said = capsys.readouterr().err
    assert "tenant: tenant id must be 1 to 128 ASCII letters, digits, '-' or '_'" in said
    assert keys_stored(table) == before


def test_the_longest_tenant_id_the_api_takes_gets_its_key(
    provisioned: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = "Acme_Ops-7" + "x" * 118
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "admin",
                "create-key",
                "--tenant",
                tenant,
                "--tenants-table",
                provisioned.tenants_table,
            ]
        )
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("pf_")
    assert tenant in keys_stored(provisioned.tenants_table)
