"""The job role on the embedded AWS: the worker assumes it per tenant, as on AWS.

moto does not evaluate IAM policies, so locally the role isolates nothing; it is created so
that the worker takes the same path as on AWS (AssumeRole with the session tag
``tenant=<id>``, then the tenant's stores on those credentials). The policies that do the
isolating are the CDK stack's (``infra/constructs/tenant_isolation.py``), checked by
tests/infra.
"""

from __future__ import annotations

import json
from typing import Any

from pagefleet.specs.resources import JOB_ROLE_LOCAL_NAME, TENANT_SESSION_TAG

TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Condition": {"StringLike": {f"aws:RequestTag/{TENANT_SESSION_TAG}": "?*"}},
        }
    ],
}


def create_job_role(iam: Any, *, prefix: str = "") -> str:
    """The role's ARN (created once; idempotent)."""
    name = prefix + JOB_ROLE_LOCAL_NAME
    try:
        return str(iam.get_role(RoleName=name)["Role"]["Arn"])
    except iam.exceptions.NoSuchEntityException:
        pass
    role = iam.create_role(
        RoleName=name,
        AssumeRolePolicyDocument=json.dumps(TRUST),
        Description="pagefleet job role: one tenant's data, by the session tag",
        MaxSessionDuration=3600,
    )
    return str(role["Role"]["Arn"])
