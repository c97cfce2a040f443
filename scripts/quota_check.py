"""Each stage's needs against its account's quotas: Fargate vCPU, Lambda concurrency, Elastic IPs.

    .venv/bin/python scripts/quota_check.py [--aws] [STAGE ...]

Offline by default (what ``make deploy-check`` runs without credentials): prints what each
stage needs and the command that reads the quota. With ``--aws`` (``make deploy-check
QUOTAS=aws``) it reads the quotas with the credentials of the environment, in each stage's
region (or the CLI's), and exits 1 if any is short. The needs are ``infra/quotas.py``'s;
the deployment's own settings (``pagefleet.deploy.json``) count, as ``cdk deploy`` reads
them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))


def stage_config(stage: str) -> Any:
    from aws_cdk import App

    from infra.deploy_file import load_config

    return load_config(App(context={"pagefleet:stage": stage}).node)


def quotas_client(region: str | None) -> Any:
    import boto3

    return boto3.client("service-quotas", region_name=region)


def main(argv: list[str] | None = None, *, client_for: Any = quotas_client) -> int:
    from infra.config import STAGES
    from infra.quotas import check

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aws", action="store_true", help="read the quotas from the account")
    parser.add_argument("stages", nargs="*", default=list(STAGES))
    args = parser.parse_args(argv)
    short = False
    for stage in args.stages:
        config = stage_config(stage)
        client = client_for(config.region) if args.aws else None
        for verdict in check(config, client):
            print(verdict.line(stage))
            short = short or verdict.short
    if short:
        print(
            "quota: raise what is SHORT (Service Quotas console, or `aws service-quotas "
            "request-service-quota-increase`), or lower max_tasks / reserved_concurrency "
            "in pagefleet.deploy.json",
            file=sys.stderr,
        )
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
