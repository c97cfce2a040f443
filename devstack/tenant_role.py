"""The job role on the embedded AWS: the worker assumes it per tenant, as on AWS.

moto itself evaluates no IAM policy: the role is created so that AssumeRole succeeds there,
and the worker takes the same path as on AWS (AssumeRole with the session tag
``tenant=<id>``, then the tenant's stores on those credentials). What isolates is the local
IAM check in front of moto (``devstack.iam``): it evaluates the synthesized template's trust
policy on the AssumeRole and the role's policies (``infra/constructs/tenant_isolation.py``)
on every call made with the session's credentials. The trust document below is moto's only.
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
