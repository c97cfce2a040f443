"""The embedded AWS's cheaper dispatch and expression handling answer as moto does.

``devstack.cheap_moto`` keeps what moto recomputed per request (method names, condition
tokens, the validator's maps of node types). Each case below runs in a fresh Python twice,
once with moto as it is and once with those patches, and both must give the same answers
and the same refusals, message for message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_CASES = r"""
import json, os, sys
os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                  AWS_DEFAULT_REGION="us-east-1")
if sys.argv[1] == "cheap":
    from devstack.cheap_moto import make_moto_cheap
    make_moto_cheap()
import boto3
from botocore.exceptions import ClientError
from moto import mock_aws

S = lambda v: {"S": v}
N = lambda v: {"N": str(v)}
KEY = {"pk": S("T#1"), "sk": S("JOB#1")}
UPDATES = [
    ("SET a = :a, b = :b", None, {":a": S("x"), ":b": N(1)}, None),
    ("SET a = :a, b = :b", None, {":a": S("y"), ":b": N(2)}, None),
    ("SET b = b + :one ADD c :one REMOVE a", None, {":one": N(1)}, None),
    ("SET l = list_append(if_not_exists(l, :empty), :l)", None,
     {":empty": {"L": []}, ":l": {"L": [S("q")]}}, None),
    ("SET l = list_append(l, :l), #n.#m = :m", {"#n": "nested", "#m": "deep"},
     {":l": {"L": [S("r")]}, ":m": S("z")}, None),
    ("SET nested = :map", None, {":map": {"M": {"deep": S("0")}}}, None),
    ("SET #n.#m = :m", {"#n": "nested", "#m": "deep"}, {":m": S("1")}, None),
    ("ADD tags :s", None, {":s": {"SS": ["a", "b", "c"]}}, None),
    ("DELETE tags :s", None, {":s": {"SS": ["b"]}}, None),
    ("REMOVE l[0], nested.deep", None, None, None),
    ("SET a = :a SET b = :b", None, {":a": S("x"), ":b": N(1)}, None),
    ("SET a = :a, a = :b", None, {":a": S("x"), ":b": S("y")}, None),
    ("SET pk = :a", None, {":a": S("x")}, None),
    ("SET a = :missing", None, {":a": S("x")}, None),
    ("SET a = :a", {"#unused": "u"}, {":a": S("x")}, None),
    ("SET b = b + :s", None, {":s": S("text")}, None),
    ("SET v = = :v", None, {":v": S("z")}, None),
    ("SET #s = :s", {"#s": "status"}, {":s": S("running")},
     "attribute_exists(pk) AND NOT attribute_exists(gone)"),
    ("SET a = :a", {"#s": "status"}, {":a": S("ok"), ":s": S("running")}, "#s = :s"),
    ("SET a = :a", {"#s": "status"}, {":a": S("no"), ":s": S("queued")}, "#s = :s"),
    ("SET a = :a", {"#s": "status"},
     {":a": S("in"), ":q": S("queued"), ":r": S("running")}, "#s IN (:q, :r)"),
    ("SET a = :a", None, {":a": S("between"), ":lo": N(0), ":hi": N(9)},
     "b BETWEEN :lo AND :hi AND size(tags) > :lo"),
    ("SET a = :a", None, {":a": S("prefix"), ":p": S("T#")},
     "(begins_with(pk, :p) OR attribute_not_exists(a)) AND contains(tags, :a)"),
    ("SET a = :a", None, {":a": S("x")}, "status = :a"),
    ("SET a = :a", None, {":a": S("x")}, "a = = :a"),
    ("SET a = :a", None, {":a": S("x")}, "attribute_exists(pk) AND"),
]

def outcome(call):
    try:
        answer = call()
        return {"ok": answer.get("Attributes", answer.get("Item"))}
    except ClientError as refused:
        error = refused.response["Error"]
        return {"error": error["Code"], "message": error["Message"],
                "item": refused.response.get("Item")}
    except Exception as failed:  # moto's own failure where AWS would refuse: kept as is
        return {"error": type(failed).__name__, "message": str(failed)}

with mock_aws():
    db = boto3.client("dynamodb")
    db.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                          {"AttributeName": "sk", "AttributeType": "S"}],
                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                               {"AttributeName": "sk", "KeyType": "RANGE"}])
    db.put_item(TableName="t", Item={**KEY, "status": S("running"), "l": {"L": []}})
    found = []
    for update, names, values, condition in UPDATES:
        asked = {"TableName": "t", "Key": KEY, "UpdateExpression": update,
                 "ReturnValues": "ALL_NEW",
                 "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        if names:
            asked["ExpressionAttributeNames"] = names
        if values:
            asked["ExpressionAttributeValues"] = values
        if condition:
            asked["ConditionExpression"] = condition
        found.append(outcome(lambda: db.update_item(**asked)))
    found.append(outcome(lambda: db.get_item(TableName="t", Key=KEY)))
    print(json.dumps(found, sort_keys=True))
"""


def _answers(mode: str) -> list[dict[str, object]]:
    # Nothing of the suite's AWS settings (its moto server's endpoint): moto in-process only.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PAGEFLEET_"))}
    done = subprocess.run(
        [sys.executable, "-c", _CASES, mode],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answers: list[dict[str, object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return answers


def test_updates_and_conditions_are_answered_and_refused_as_moto_does() -> None:
    plain, cheap = _answers("plain"), _answers("cheap")
    assert cheap == plain
    # The cases reach what they are meant to: answers, refusals by the parser, the
    # validator and the condition, and a condition met by one value and not the next.
    codes = [answer.get("error") for answer in plain]
    assert codes.count(None) >= 12
    assert "ConditionalCheckFailedException" in codes
    assert codes.count("ValidationException") >= 8
