"""The API's WAF budget is per user, also for the console's requests through CloudFront: the
synthesized web ACL's rate rules are evaluated for requests as they reach API Gateway, after
the distribution's real viewer-request function (run with Node) and origin headers. One
console user cannot spend another's budget, and no client can choose its own key."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

pytestmark = [pytest.mark.infra, pytest.mark.slow]

STACK_ID = "arn:aws:cloudformation:ap-south-1:123456789012:stack/pagefleet-x/6f1c9e2a-aaaa-bbbb"
EDGE_IP = "130.176.0.10"  # a CloudFront origin-facing address


def resolve(value: Any) -> Any:
    """The few intrinsics the rules and the origin header use, with a deployed stack id."""
    if isinstance(value, dict) and "Ref" in value:
        assert value["Ref"] == "AWS::StackId", value
        return STACK_ID
    if isinstance(value, dict) and "Fn::Split" in value:
        separator, text = value["Fn::Split"]
        return resolve(text).split(separator)
    if isinstance(value, dict) and "Fn::Select" in value:
        index, items = value["Fn::Select"]
        return resolve(items)[int(index)]
    return value


def matches(statement: dict[str, Any], headers: dict[str, str]) -> bool:
    if "NotStatement" in statement:
        return not matches(statement["NotStatement"]["Statement"], headers)
    byte = statement["ByteMatchStatement"]
    assert byte["PositionalConstraint"] == "EXACTLY"
    name = byte["FieldToMatch"]["SingleHeader"]["Name"].lower()
    return headers.get(name) == resolve(byte["SearchString"])


def counted_as(rules: list[dict[str, Any]], source_ip: str, headers: dict[str, str]) -> set:
    """The (rule, key) budgets one request is counted against."""
    headers = {k.lower(): v for k, v in headers.items()}
    out = set()
    for rule in rules:
        rate = rule["Statement"].get("RateBasedStatement")
        if rate is None:
            continue
        if "ScopeDownStatement" in rate and not matches(rate["ScopeDownStatement"], headers):
            continue
        if rate["AggregateKeyType"] == "IP":
            out.add((rule["Name"], source_ip))
        else:
            assert rate["AggregateKeyType"] == "FORWARDED_IP"
            header = rate["ForwardedIPConfig"]["HeaderName"].lower()
            # WAF skips the rule for a request without the header at all.
            if header in headers:
                out.add((rule["Name"], headers[header].split(",")[0].strip()))
    return out


def run_viewer_function(code: str, viewer_ip: str, headers: dict[str, str]) -> dict[str, str]:
    """A CloudFront Functions viewer-request handler, run by Node on a CloudFront event."""
    event = {
        "version": "1.0",
        "viewer": {"ip": viewer_ip},
        "request": {
            "method": "GET",
            "uri": "/v1/jobs",
            "querystring": {},
            "headers": {k.lower(): {"value": v} for k, v in headers.items()},
            "cookies": {},
        },
    }
    script = f"{code}\nprocess.stdout.write(JSON.stringify(handler(JSON.parse(process.argv[1]))));"
    out = subprocess.run(
        ["node", "-e", script, json.dumps(event)], capture_output=True, text=True, check=True
    )
    request = json.loads(out.stdout)
    return {k: v["value"] for k, v in request["headers"].items()}


def through_cloudfront(raw: dict[str, Any], viewer_ip: str, headers: dict[str, str]) -> dict:
    """The headers of a console request to /v1/* as CloudFront sends it to the API."""
    resources = raw["Resources"]
    (distribution,) = [
        v for v in resources.values() if v["Type"] == "AWS::CloudFront::Distribution"
    ]
    config = distribution["Properties"]["DistributionConfig"]
    (behavior,) = [b for b in config["CacheBehaviors"] if b["PathPattern"] == "/v1/*"]
    (association,) = behavior["FunctionAssociations"]
    assert association["EventType"] == "viewer-request"
    code = resources[association["FunctionARN"]["Fn::GetAtt"][0]]["Properties"]["FunctionCode"]
    sent = run_viewer_function(code, viewer_ip, headers)
    (origin,) = [o for o in config["Origins"] if o["Id"] == behavior["TargetOriginId"]]
    for custom in origin.get("OriginCustomHeaders", []):  # added after the function, over it
        sent[custom["HeaderName"].lower()] = resolve(custom["HeaderValue"])
    return sent


def test_each_console_user_has_a_budget_and_no_client_picks_its_key(stage_synth) -> None:
    raw = stage_synth.raw
    acls = [v for v in raw["Resources"].values() if v["Type"] == "AWS::WAFv2::WebACL"]
    if not stage_synth.stack.config.waf:
        assert acls == []
        return
    (acl,) = acls
    rules = acl["Properties"]["Rules"]
    forged = {"X-Pagefleet-Viewer-Ip": "203.0.113.99", "X-Pagefleet-Edge": "a-guess"}

    alice = through_cloudfront(raw, "198.51.100.1", forged)
    bob = through_cloudfront(raw, "198.51.100.2", {})
    alice_keys = counted_as(rules, EDGE_IP, alice)
    bob_keys = counted_as(rules, EDGE_IP, bob)
    assert {key for _, key in alice_keys} == {"198.51.100.1"}  # not the edge, not the forgery
    assert {key for _, key in bob_keys} == {"198.51.100.2"}
    # A client calling the API's own URL is counted by its address, whatever it sends.
    direct = counted_as(rules, "192.0.2.7", forged)
    assert {key for _, key in direct} == {"192.0.2.7"}
    assert {key for _, key in counted_as(rules, "192.0.2.7", {})} == {"192.0.2.7"}
    # Every request is counted somewhere, against the same limit.
    limits = {
        r["Statement"]["RateBasedStatement"]["Limit"]
        for r in rules
        if "RateBasedStatement" in r["Statement"]
    }
    assert limits == {stage_synth.stack.config.waf_rate_limit_per_5min}
