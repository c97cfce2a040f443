"""The REST API's web ACL (WAF, regional): a request budget per user, and AWS's managed rules.

The console reaches the API through CloudFront (``/v1/*``, ``console.py``), so those requests
come from CloudFront's addresses: a budget per source IP would be shared by every console
user behind one edge, and one user could exhaust it for all. So the budget is per *user*:

- through CloudFront, the console's viewer-request function writes the viewer's address
  (``event.viewer.ip``) into ``VIEWER_IP_HEADER``, replacing whatever the client sent, and
  the distribution adds ``EDGE_HEADER`` with a value only this stack knows (the random part
  of its stack id, never shown to clients); requests carrying it are counted by the viewer
  address (forwarded-IP aggregation on ``VIEWER_IP_HEADER``);
- every other request (clients calling the API's own URL) is counted by its source IP. A
  client that sends the viewer header itself, without the edge value, gains nothing.

A CloudFront-scope web ACL would see viewers directly, but must live in us-east-1 (this stack
is regional), and this ACL would still count the console's requests per edge address.
"""

from __future__ import annotations

from aws_cdk import Aws, Fn
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from infra.config import StageConfig

# Set by the console distribution on its /v1/* requests to the API (lowercase: CloudFront
# Functions see header names so).
VIEWER_IP_HEADER = "x-pagefleet-viewer-ip"
EDGE_HEADER = "x-pagefleet-edge"


def edge_secret() -> str:
    """The value CloudFront sends in ``EDGE_HEADER``: the UUID of the stack's id (random per
    stack, stable across deploys, not visible to API clients)."""
    return Fn.select(2, Fn.split("/", Aws.STACK_ID))


def _visibility(name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True
    )


def _through_cloudfront() -> wafv2.CfnWebACL.StatementProperty:
    return wafv2.CfnWebACL.StatementProperty(
        byte_match_statement=wafv2.CfnWebACL.ByteMatchStatementProperty(
            field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(
                single_header={"Name": EDGE_HEADER}
            ),
            positional_constraint="EXACTLY",
            search_string=edge_secret(),
            text_transformations=[
                wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")
            ],
        )
    )


def _rate_rule(
    name: str,
    priority: int,
    limit: int,
    scope_down: wafv2.CfnWebACL.StatementProperty,
    *,
    forwarded: bool,
) -> wafv2.CfnWebACL.RuleProperty:
    rate = wafv2.CfnWebACL.RateBasedStatementProperty(
        limit=limit,
        aggregate_key_type="FORWARDED_IP" if forwarded else "IP",
        # Through CloudFront the header always holds an address; should it not, MATCH gives
        # the request the rule's action rather than letting it through uncounted.
        forwarded_ip_config=wafv2.CfnWebACL.ForwardedIPConfigurationProperty(
            header_name=VIEWER_IP_HEADER, fallback_behavior="MATCH"
        )
        if forwarded
        else None,
        scope_down_statement=scope_down,
    )
    return wafv2.CfnWebACL.RuleProperty(
        name=name,
        priority=priority,
        statement=wafv2.CfnWebACL.StatementProperty(rate_based_statement=rate),
        action=wafv2.CfnWebACL.RuleActionProperty(block={}),
        visibility_config=_visibility(name),
    )


def _managed(name: str, priority: int) -> wafv2.CfnWebACL.RuleProperty:
    return wafv2.CfnWebACL.RuleProperty(
        name=name,
        priority=priority,
        statement=wafv2.CfnWebACL.StatementProperty(
            managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                vendor_name="AWS", name=name
            )
        ),
        override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
        visibility_config=_visibility(name),
    )


class ApiFirewall(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, stage: apigw.Stage
    ) -> None:
        super().__init__(scope, construct_id)
        limit = config.waf_rate_limit_per_5min
        direct = wafv2.CfnWebACL.StatementProperty(
            not_statement=wafv2.CfnWebACL.NotStatementProperty(statement=_through_cloudfront())
        )
        self.web_acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=_visibility("pagefleet-api"),
            rules=[
                _rate_rule("rate-per-ip", 0, limit, direct, forwarded=False),
                _rate_rule("rate-per-viewer", 1, limit, _through_cloudfront(), forwarded=True),
                # Not the common rule set: its 8 KB body limit would block real workflows.
                _managed("AWSManagedRulesKnownBadInputsRuleSet", 2),
                _managed("AWSManagedRulesAmazonIpReputationList", 3),
            ],
        )
        wafv2.CfnWebACLAssociation(
            self,
            "WebAclAssociation",
            resource_arn=stage.stage_arn,
            web_acl_arn=self.web_acl.attr_arn,
        )
