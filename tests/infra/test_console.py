"""The web console on AWS: S3 behind CloudFront (origin access control), /v1/* to the REST
API on the same origin, security headers, the files and config.json deployed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from .helpers import as_list, logical_id

pytestmark = [pytest.mark.infra, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
ALL_METHODS = {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"}


def _distribution(synth) -> dict:  # type: ignore[no-untyped-def]
    (props,) = synth.props("AWS::CloudFront::Distribution")
    return dict(props["DistributionConfig"])


def _origin(config: dict, origin_id: str) -> dict:
    return next(o for o in config["Origins"] if o["Id"] == origin_id)


def _resolve(synth, value):  # type: ignore[no-untyped-def]
    return synth.stack.resolve(value)


def test_console_bucket_is_served_through_origin_access_control(synth) -> None:
    config = _distribution(synth)
    default = config["DefaultCacheBehavior"]
    origin = _origin(config, default["TargetOriginId"])
    bucket_id = logical_id(synth.stack.console.bucket)
    assert origin["DomainName"] == {"Fn::GetAtt": [bucket_id, "RegionalDomainName"]}
    (oac_id,) = synth.resources("AWS::CloudFront::OriginAccessControl")
    assert origin["OriginAccessControlId"] == {"Fn::GetAtt": [oac_id, "Id"]}
    assert origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}  # no legacy OAI
    assert not synth.resources("AWS::CloudFront::CloudFrontOriginAccessIdentity")
    assert default["ViewerProtocolPolicy"] == "redirect-to-https"
    assert default["Compress"] is True
    assert config["HttpVersion"] == "http2and3"
    assert config["Logging"]["Bucket"] == {
        "Fn::GetAtt": [logical_id(synth.stack.console.logs_bucket), "RegionalDomainName"]
    }


def test_console_bucket_is_private_and_read_only_by_the_distribution(synth) -> None:
    console = synth.stack.console
    bucket_id = logical_id(console.bucket)
    props = synth.raw["Resources"][bucket_id]["Properties"]
    assert props["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"),
        True,
    )
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}
    assert props["LoggingConfiguration"]["DestinationBucketName"] == {
        "Ref": logical_id(console.logs_bucket)
    }
    (policy,) = [
        p for p in synth.props("AWS::S3::BucketPolicy") if p["Bucket"] == {"Ref": bucket_id}
    ]
    statements = policy["PolicyDocument"]["Statement"]
    allows = [s for s in statements if s["Effect"] == "Allow"]
    distribution = _resolve(synth, console.distribution.distribution_arn)
    assert allows == [
        {
            "Action": "s3:GetObject",
            "Condition": {"StringEquals": {"AWS:SourceArn": distribution}},
            "Effect": "Allow",
            "Principal": {"Service": "cloudfront.amazonaws.com"},
            "Resource": {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/*"]]},
        }
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )


def test_v1_goes_to_the_rest_api_uncached_with_every_method(synth) -> None:
    from aws_cdk import aws_cloudfront as cloudfront

    config = _distribution(synth)
    (behavior,) = [b for b in config["CacheBehaviors"] if b["PathPattern"] == "/v1/*"]
    origin = _origin(config, behavior["TargetOriginId"])
    rest_api = logical_id(synth.stack.api.rest_api)
    assert origin["DomainName"]["Fn::Join"][1][0] == {"Ref": rest_api}
    assert ".execute-api." in origin["DomainName"]["Fn::Join"][1]
    # No origin path: /v1/jobs reaches https://<api>/v1/jobs, the stage being the version.
    assert not origin.get("OriginPath")
    assert origin["CustomOriginConfig"]["OriginProtocolPolicy"] == "https-only"
    assert origin["CustomOriginConfig"]["OriginSSLProtocols"] == ["TLSv1.2"]
    assert set(behavior["AllowedMethods"]) == ALL_METHODS
    assert behavior["CachePolicyId"] == _resolve(
        synth, cloudfront.CachePolicy.CACHING_DISABLED.cache_policy_id
    )
    assert behavior["OriginRequestPolicyId"] == _resolve(
        synth, cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER.origin_request_policy_id
    )
    assert behavior["ViewerProtocolPolicy"] == "https-only"
    # API paths are never rewritten: its one function only adds the viewer's address for
    # the WAF (tests/infra/test_edge_rate_limit.py runs it).
    (association,) = behavior["FunctionAssociations"]
    assert association["FunctionARN"]["Fn::GetAtt"][0] == logical_id(
        synth.stack.console.api_viewer_request
    )
    code = synth.raw["Resources"][logical_id(synth.stack.console.api_viewer_request)]
    assert "request.uri" not in code["Properties"]["FunctionCode"]


def test_security_headers_with_a_strict_csp(synth) -> None:
    config = _distribution(synth)
    policy_id = config["DefaultCacheBehavior"]["ResponseHeadersPolicyId"]
    assert config["CacheBehaviors"][0]["ResponseHeadersPolicyId"] == policy_id
    headers = synth.raw["Resources"][policy_id["Ref"]]["Properties"]
    security = headers["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    assert security["StrictTransportSecurity"] == {
        "AccessControlMaxAgeSec": 2 * 365 * 24 * 3600,
        "IncludeSubdomains": True,
        "Preload": True,
        "Override": True,
    }
    assert security["ContentTypeOptions"] == {"Override": True}
    assert security["FrameOptions"]["FrameOption"] == "DENY"
    assert security["ReferrerPolicy"]["ReferrerPolicy"] == "no-referrer"
    parts = security["ContentSecurityPolicy"]["ContentSecurityPolicy"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else json.dumps(p) for p in parts)
    directives = {d.split()[0]: d.split()[1:] for d in text.split("; ")}
    assert directives["default-src"] == ["'none'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["style-src"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["object-src"] == ["'none'"]
    assert "unsafe" not in text
    artifacts = logical_id(synth.stack.artifacts.bucket)
    # Presigned artifact URLs (images inline) and the live WebSocket are allowed.
    img = " ".join(directives["img-src"])
    assert json.dumps({"Fn::GetAtt": [artifacts, "DomainName"]}) in img
    connect = " ".join(directives["connect-src"])
    assert connect.startswith("'self' wss://")
    assert json.dumps({"Ref": logical_id(synth.stack.live.api)}) in connect


def test_deployment_ships_the_console_and_its_config(synth) -> None:
    (deployment,) = synth.props("Custom::CDKBucketDeployment")
    console = synth.stack.console
    assert deployment["DestinationBucketName"] == {"Ref": logical_id(console.bucket)}
    assert deployment["DestinationBucketKeyPrefix"] == "console/"
    assert deployment["DistributionId"] == {"Ref": logical_id(console.distribution)}
    assert deployment["DistributionPaths"] == ["/console/*"]
    assert deployment["SystemMetadata"]["cache-control"] == "public, max-age=300"
    staged = [
        synth.outdir / f"asset.{k.removesuffix('.zip')}" for k in deployment["SourceObjectKeys"]
    ]
    files, config = staged
    shipped = {p.relative_to(files).as_posix() for p in files.rglob("*") if p.is_file()}
    source = REPO_ROOT / "console"
    expected = {p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file()}
    assert "index.html" in shipped
    assert shipped == expected - {"config.json"}
    # config.json: the live URL is filled in at deploy time, through the marker.
    (marker_map,) = [m for m in deployment["SourceMarkers"] if m]
    (marker, value) = next(iter(marker_map.items()))
    text = (config / "config.json").read_text().replace(marker, '"wss://<api>/live"')
    assert json.loads(text) == {
        "api_base": "/v1",
        "websocket_url": "wss://<api>/live",
        "stage": synth.stage,
    }
    assert value["Fn::Join"][1][0] == '"wss://'
    assert value["Fn::Join"][1][1] == {"Ref": logical_id(synth.stack.live.api)}
    assert value["Fn::Join"][1][-1] == '/live"'


def test_deployment_role_has_named_actions_on_named_resources(synth) -> None:
    role = logical_id(synth.stack.console.deploy_role)
    (policy,) = [p for p in synth.props("AWS::IAM::Policy") if {"Ref": role} in p["Roles"]]
    actions = {a for s in policy["PolicyDocument"]["Statement"] for a in as_list(s["Action"])}
    assert actions == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "s3:GetObject",
        "s3:ListBucket",
        "s3:PutObject",
        "s3:DeleteObject",
        "cloudfront:CreateInvalidation",
        "cloudfront:GetInvalidation",
    }
    for statement in policy["PolicyDocument"]["Statement"]:
        assert "*" not in as_list(statement["Resource"])


def test_every_stage_outputs_the_console_url(stage_synth) -> None:
    distribution = logical_id(stage_synth.stack.console.distribution)
    url = {
        "Fn::Join": ["", ["https://", {"Fn::GetAtt": [distribution, "DomainName"]}, "/console/"]]
    }
    assert stage_synth.raw["Outputs"]["ConsoleUrl"]["Value"] == url
    assert stage_synth.resources("Custom::CDKBucketDeployment")
    # A job that waits for a person is notified with a link into this console.
    (reader,) = (
        f
        for f in stage_synth.props("AWS::Lambda::Function")
        if f.get("Handler") == "functions.job_changes.handler.handler"
    )
    assert reader["Environment"]["Variables"]["PAGEFLEET_CONSOLE_URL"] == url


VIEWER_CASES = [
    ("/", {"redirect": "/console/"}),
    ("/console", {"redirect": "/console/"}),
    ("/console/", {"uri": "/console/index.html"}),
    ("/console/jobs/01HZX", {"uri": "/console/index.html"}),
    ("/console/app.js", {"uri": "/console/app.js"}),
    ("/console/views/jobs.js", {"uri": "/console/views/jobs.js"}),
    ("/console/config.json", {"uri": "/console/config.json"}),
]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node (as the CDK does)")
def test_viewer_request_function_routes_the_console() -> None:
    from infra.constructs.console import VIEWER_REQUEST_JS

    script = VIEWER_REQUEST_JS + (
        "const out = {};"
        f"for (const uri of {json.dumps([u for u, _ in VIEWER_CASES])}) {{"
        "  const r = handler({request: {uri: uri, headers: {}}});"
        "  out[uri] = r.statusCode ? {redirect: r.headers.location.value} : {uri: r.uri};"
        "}"
        "console.log(JSON.stringify(out));"
    )
    result = subprocess.run(
        ["node", "-e", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == dict(VIEWER_CASES)


def test_custom_domain_needs_its_certificate() -> None:
    from infra.config import ConsoleConfig

    with pytest.raises(ValidationError, match="go together"):
        ConsoleConfig(domain_name="console.example.com")
    with pytest.raises(ValidationError):  # CloudFront takes certificates from us-east-1 only
        ConsoleConfig(
            domain_name="console.example.com",
            certificate_arn="arn:aws:acm:eu-west-1:123456789012:certificate/abc-123",
        )
    ConsoleConfig(
        domain_name="console.example.com",
        certificate_arn="arn:aws:acm:us-east-1:123456789012:certificate/abc-123",
    )
