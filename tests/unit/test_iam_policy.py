"""The local IAM evaluator against AWS's documented evaluation logic, case by case.

Each row is (policy statements, request, expected decision). The rules come from the IAM
User Guide: "Policy evaluation logic" (explicit deny > allow > implicit deny), "Condition
operators" (a missing key fails positive operators and satisfies negated ones; IfExists),
"Single-valued vs. multivalued context keys" (ForAllValues holds vacuously for a missing or
empty key, ForAnyValue needs one match), "Policy variables" (a missing variable makes the
element match nothing), and the wildcard rules of Action (case-insensitive) and Resource
(case-sensitive, ``*`` and ``?``).
"""

from __future__ import annotations

from typing import Any

import pytest

from devstack.iam.policy import Decision, Policy, PolicyError, Request, evaluate

ALLOW, DENY, IMPLICIT = Decision.ALLOW, Decision.EXPLICIT_DENY, Decision.IMPLICIT_DENY
BUCKET = "arn:aws:s3:::artifacts"
TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/usage"
TENANT = "${aws:PrincipalTag/tenant}"


def allow(action: Any, resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def deny(action: Any, resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": action, "Resource": resource, **extra}


def decide(statements: list[dict[str, Any]], request: Request) -> Decision:
    return evaluate([Policy.of({"Version": "2012-10-17", "Statement": statements})], request)


TAGGED_A = {"aws:PrincipalTag/tenant": "a"}
CASES = [
    # --- evaluation order ---
    ("nothing allows", [], Request("s3:GetObject", f"{BUCKET}/a/x"), IMPLICIT),
    (
        "allow",
        [allow("s3:GetObject", f"{BUCKET}/*")],
        Request("s3:GetObject", f"{BUCKET}/x"),
        ALLOW,
    ),
    (
        "deny beats allow",
        [allow("s3:*", "*"), deny("s3:GetObject", f"{BUCKET}/secret/*")],
        Request("s3:GetObject", f"{BUCKET}/secret/k"),
        DENY,
    ),
    (
        "a deny that does not apply leaves the allow",
        [allow("s3:*", "*"), deny("s3:GetObject", f"{BUCKET}/secret/*")],
        Request("s3:GetObject", f"{BUCKET}/open/k"),
        ALLOW,
    ),
    # --- actions: wildcards, case-insensitive, NotAction ---
    ("action wildcard", [allow("dynamodb:Get*")], Request("dynamodb:GetItem", TABLE), ALLOW),
    ("action case", [allow("DynamoDB:getitem")], Request("dynamodb:GetItem", TABLE), ALLOW),
    ("action ?", [allow("sqs:?etQueueUrl")], Request("sqs:GetQueueUrl", "*"), ALLOW),
    ("other action", [allow("dynamodb:Get*")], Request("dynamodb:PutItem", TABLE), IMPLICIT),
    (
        "NotAction allows the rest",
        [{"Effect": "Allow", "NotAction": "s3:DeleteObject", "Resource": "*"}],
        Request("s3:GetObject", f"{BUCKET}/k"),
        ALLOW,
    ),
    (
        "NotAction excludes its own",
        [{"Effect": "Allow", "NotAction": ["s3:Delete*"], "Resource": "*"}],
        Request("s3:DeleteObject", f"{BUCKET}/k"),
        IMPLICIT,
    ),
    # --- resources: wildcards, case-sensitive, NotResource ---
    (
        "resource case",
        [allow("s3:GetObject", f"{BUCKET}/A/*")],
        Request("s3:GetObject", f"{BUCKET}/a/k"),
        IMPLICIT,
    ),
    (
        "resource ?",
        [allow("s3:GetObject", f"{BUCKET}/?/k")],
        Request("s3:GetObject", f"{BUCKET}/a/k"),
        ALLOW,
    ),
    (
        "index under table",
        [allow("dynamodb:Query", f"{TABLE}/index/*")],
        Request("dynamodb:Query", f"{TABLE}/index/by_day"),
        ALLOW,
    ),
    (
        "table is not its index",
        [allow("dynamodb:Query", TABLE)],
        Request("dynamodb:Query", f"{TABLE}/index/by_day"),
        IMPLICIT,
    ),
    (
        "NotResource",
        [{"Effect": "Deny", "Action": "s3:*", "NotResource": f"{BUCKET}/public/*"}, allow("s3:*")],
        Request("s3:GetObject", f"{BUCKET}/private/k"),
        DENY,
    ),
    # --- policy variables ---
    (
        "variable in resource",
        [allow("s3:GetObject", f"{BUCKET}/{TENANT}/*")],
        Request("s3:GetObject", f"{BUCKET}/a/k", TAGGED_A),
        ALLOW,
    ),
    (
        "variable: another tenant's prefix",
        [allow("s3:GetObject", f"{BUCKET}/{TENANT}/*")],
        Request("s3:GetObject", f"{BUCKET}/b/k", TAGGED_A),
        IMPLICIT,
    ),
    (
        "variable missing: matches nothing (not everything)",
        [allow("s3:GetObject", f"{BUCKET}/{TENANT}/*")],
        Request("s3:GetObject", f"{BUCKET}//k"),
        IMPLICIT,
    ),
    (
        "tag key names are case-insensitive",
        [allow("s3:GetObject", f"{BUCKET}/{TENANT}/*")],
        Request("s3:GetObject", f"{BUCKET}/a/k", {"AWS:PRINCIPALTAG/TENANT": "a"}),
        ALLOW,
    ),
    (
        "${*} is a literal star",
        [allow("s3:GetObject", f"{BUCKET}/" + "${*}")],
        Request("s3:GetObject", f"{BUCKET}/anything"),
        IMPLICIT,
    ),
    # --- s3:prefix (StringLike) ---
    (
        "listing the tenant's prefix",
        [allow("s3:ListBucket", BUCKET, Condition={"StringLike": {"s3:prefix": [f"{TENANT}/*"]}})],
        Request("s3:ListBucket", BUCKET, {**TAGGED_A, "s3:prefix": "a/sessions/x.json"}),
        ALLOW,
    ),
    (
        "listing another prefix",
        [allow("s3:ListBucket", BUCKET, Condition={"StringLike": {"s3:prefix": [f"{TENANT}/*"]}})],
        Request("s3:ListBucket", BUCKET, {**TAGGED_A, "s3:prefix": "b/sessions/"}),
        IMPLICIT,
    ),
    (
        "listing without a prefix: the key is missing, StringLike fails",
        [allow("s3:ListBucket", BUCKET, Condition={"StringLike": {"s3:prefix": [f"{TENANT}/*"]}})],
        Request("s3:ListBucket", BUCKET, TAGGED_A),
        IMPLICIT,
    ),
    # --- dynamodb:LeadingKeys (ForAllValues:StringEquals, multivalued) ---
    (
        "own partition",
        [
            allow(
                "dynamodb:GetItem",
                TABLE,
                Condition={
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"TENANT#{TENANT}"]}
                },
            )
        ],
        Request("dynamodb:GetItem", TABLE, {**TAGGED_A, "dynamodb:LeadingKeys": ("TENANT#a",)}),
        ALLOW,
    ),
    (
        "another partition",
        [
            allow(
                "dynamodb:GetItem",
                TABLE,
                Condition={
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"TENANT#{TENANT}"]}
                },
            )
        ],
        Request("dynamodb:GetItem", TABLE, {**TAGGED_A, "dynamodb:LeadingKeys": ("TENANT#b",)}),
        IMPLICIT,
    ),
    (
        "a batch: every key must be the tenant's",
        [
            allow(
                "dynamodb:BatchGetItem",
                TABLE,
                Condition={
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"TENANT#{TENANT}"]}
                },
            )
        ],
        Request(
            "dynamodb:BatchGetItem",
            TABLE,
            {**TAGGED_A, "dynamodb:LeadingKeys": ("TENANT#a", "TENANT#b")},
        ),
        IMPLICIT,
    ),
    (
        "ForAllValues holds vacuously when the key is missing (a Scan)",
        [
            allow(
                "dynamodb:Scan",
                TABLE,
                Condition={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["x"]}},
            )
        ],
        Request("dynamodb:Scan", TABLE),
        ALLOW,
    ),
    (
        "ForAllValues:StringLike: every tag key matches a pattern",
        [
            allow(
                "sts:TagSession",
                "*",
                Condition={"ForAllValues:StringLike": {"aws:TagKeys": ["team-*", "tenant"]}},
            )
        ],
        Request("sts:TagSession", "*", {"aws:TagKeys": ("tenant", "team-a")}),
        ALLOW,
    ),
    (
        "ForAllValues:StringLike: one key outside the patterns",
        [
            allow(
                "sts:TagSession",
                "*",
                Condition={"ForAllValues:StringLike": {"aws:TagKeys": ["team-*"]}},
            )
        ],
        Request("sts:TagSession", "*", {"aws:TagKeys": ("team-a", "admin")}),
        IMPLICIT,
    ),
    (
        "ForAnyValue needs one match",
        [
            allow(
                "sts:TagSession",
                "*",
                Condition={"ForAnyValue:StringEquals": {"aws:TagKeys": ["tenant"]}},
            )
        ],
        Request("sts:TagSession", "*", {"aws:TagKeys": ("team", "tenant")}),
        ALLOW,
    ),
    (
        "ForAnyValue fails on a missing key",
        [
            allow(
                "sts:TagSession",
                "*",
                Condition={"ForAnyValue:StringEquals": {"aws:TagKeys": ["tenant"]}},
            )
        ],
        Request("sts:TagSession", "*"),
        IMPLICIT,
    ),
    (
        "ForAllValues: an extra tag key fails",
        [
            allow(
                "sts:TagSession",
                "*",
                Condition={"ForAllValues:StringEquals": {"aws:TagKeys": ["tenant"]}},
            )
        ],
        Request("sts:TagSession", "*", {"aws:TagKeys": ("tenant", "admin")}),
        IMPLICIT,
    ),
    # --- other operators, missing keys, IfExists ---
    (
        "StringEquals, one of several values",
        [
            allow(
                "iam:PassRole",
                "*",
                Condition={
                    "StringEquals": {
                        "iam:PassedToService": ["a.amazonaws.com", "scheduler.amazonaws.com"]
                    }
                },
            )
        ],
        Request("iam:PassRole", "*", {"iam:PassedToService": "scheduler.amazonaws.com"}),
        ALLOW,
    ),
    (
        "StringEquals on a missing key fails",
        [
            allow(
                "iam:PassRole",
                "*",
                Condition={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        ],
        Request("iam:PassRole", "*"),
        IMPLICIT,
    ),
    (
        "StringNotEquals on a missing key holds",
        [
            deny("s3:*", "*", Condition={"StringNotEquals": {"aws:PrincipalTag/team": "ops"}}),
            allow("s3:*"),
        ],
        Request("s3:GetObject", f"{BUCKET}/k"),
        DENY,
    ),
    (
        "IfExists holds on a missing key",
        [
            allow(
                "s3:GetObject",
                "*",
                Condition={"StringEqualsIfExists": {"aws:PrincipalTag/team": "ops"}},
            )
        ],
        Request("s3:GetObject", f"{BUCKET}/k"),
        ALLOW,
    ),
    (
        "IfExists still compares a present key",
        [
            allow(
                "s3:GetObject",
                "*",
                Condition={"StringEqualsIfExists": {"aws:PrincipalTag/team": "ops"}},
            )
        ],
        Request("s3:GetObject", f"{BUCKET}/k", {"aws:PrincipalTag/team": "dev"}),
        IMPLICIT,
    ),
    (
        "Bool: TLS only (deny plain HTTP)",
        [allow("s3:*"), deny("s3:*", "*", Condition={"Bool": {"aws:SecureTransport": "false"}})],
        Request("s3:GetObject", f"{BUCKET}/k", {"aws:SecureTransport": "false"}),
        DENY,
    ),
    (
        "Null: the tag must be set",
        [allow("sts:AssumeRole", "*", Condition={"Null": {"aws:RequestTag/tenant": "false"}})],
        Request("sts:AssumeRole", "*"),
        IMPLICIT,
    ),
    (
        "StringLike ?*: a non-empty value",
        [allow("sts:AssumeRole", "*", Condition={"StringLike": {"aws:RequestTag/tenant": "?*"}})],
        Request("sts:AssumeRole", "*", {"aws:RequestTag/tenant": ""}),
        IMPLICIT,
    ),
    (
        "every condition must hold (AND), any value may (OR)",
        [allow("s3:GetObject", "*", Condition={"StringEquals": {"k1": ["x", "y"], "k2": "z"}})],
        Request("s3:GetObject", "*", {"k1": "y", "k2": "other"}),
        IMPLICIT,
    ),
    (
        "ArnEquals with a wildcard-free ARN",
        [
            allow(
                "sts:AssumeRole",
                "*",
                Condition={"ArnEquals": {"aws:PrincipalArn": ["arn:aws:iam::1:role/worker"]}},
            )
        ],
        Request("sts:AssumeRole", "*", {"aws:PrincipalArn": "arn:aws:iam::1:role/worker"}),
        ALLOW,
    ),
    (
        "ArnLike: a wildcard stays inside its part",
        [
            allow(
                "sts:AssumeRole",
                "*",
                Condition={"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/w*"}},
            )
        ],
        Request("sts:AssumeRole", "*", {"aws:PrincipalArn": "arn:aws:iam::1:role/worker"}),
        ALLOW,
    ),
]


@pytest.mark.parametrize(
    ("name", "statements", "request_", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_decision(
    name: str, statements: list[dict[str, Any]], request_: Request, expected: Decision
) -> None:
    assert decide(statements, request_) is expected


def test_deny_in_one_policy_beats_allow_in_another() -> None:
    allowing = Policy.of({"Statement": [allow("s3:*")]})
    denying = Policy.of({"Statement": [deny("s3:DeleteObject")]})
    request = Request("s3:DeleteObject", f"{BUCKET}/k")
    assert evaluate([allowing, denying], request) is DENY
    assert evaluate([allowing], request) is ALLOW


@pytest.mark.parametrize(
    ("principal", "caller", "expected"),
    [
        ({"AWS": "arn:aws:iam::123456789012:root"}, "arn:aws:iam::123456789012:role/worker", ALLOW),
        ({"AWS": "123456789012"}, "arn:aws:iam::123456789012:role/worker", ALLOW),
        (
            {"AWS": "arn:aws:iam::999999999999:root"},
            "arn:aws:iam::123456789012:role/worker",
            IMPLICIT,
        ),
        (
            {"AWS": "arn:aws:iam::123456789012:role/api"},
            "arn:aws:iam::123456789012:role/worker",
            IMPLICIT,
        ),
        ({"Service": "ecs-tasks.amazonaws.com"}, "arn:aws:iam::123456789012:role/worker", IMPLICIT),
        ("*", "arn:aws:iam::123456789012:role/worker", ALLOW),
    ],
)
def test_trust_policy_principals(principal: Any, caller: str, expected: Decision) -> None:
    trust = [{"Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole"}]
    request = Request("sts:AssumeRole", "arn:aws:iam::123456789012:role/job", principal=caller)
    assert decide(trust, request) is expected


@pytest.mark.parametrize(
    "statement",
    [
        allow("s3:*", Condition={"DateGreaterThan": {"aws:CurrentTime": "2020-01-01"}}),
        allow("s3:*", Condition={"ForEveryValue:StringEquals": {"k": "v"}}),
        {"Effect": "Allow", "NotPrincipal": {"AWS": "x"}, "Action": "s3:*", "Resource": "*"},
        {"Effect": "Maybe", "Action": "s3:*", "Resource": "*"},
    ],
)
def test_what_it_cannot_evaluate_is_refused_not_ignored(statement: dict[str, Any]) -> None:
    with pytest.raises(PolicyError):
        Policy.of({"Statement": [statement]})
