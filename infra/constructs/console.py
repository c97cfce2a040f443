"""Console: the web console's files in S3, served by CloudFront with the REST API beside it.

browser ─HTTPS─> CloudFront ─┬─ /console/*, / ─> S3 bucket (origin access control, private)
                             └─ /v1/*         ─> REST API (stage v1; no caching)

One origin for the page and the API, so the console calls ``/v1/...`` with no CORS, as it
does on the local gateway (``<API URL>/console/``). The files are deployed under the
``console/`` key prefix with a generated ``console/config.json`` (the API base, the
WebSocket URL, the stage); each deploy invalidates ``/console/*``. A viewer-request function
redirects ``/`` to ``/console/`` and serves the page for the console's own paths (no file
extension), since S3 behind origin access control has no index documents; error pages are
not rewritten because they would also turn the API's 403s and 404s into HTML. Requests to
``/v1/*`` carry the viewer's address and the stack's edge marker, so the API's WAF counts
each console user on their own (``api_firewall``).
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from infra.config import StageConfig
from infra.nag import acknowledge, resource_text
from pagefleet.specs.console_site import (
    CONFIG_FILE,
    CONSOLE_DIR,
    SiteConfig,
    content_security_policy,
)
from pagefleet.specs.settings import ChangesSettings

from .api import STAGE_NAME as API_STAGE
from .api import Api
from .api_firewall import EDGE_HEADER, VIEWER_IP_HEADER, edge_secret
from .artifacts import ArtifactsBucket
from .live import Live, add_env

REPO_ROOT = Path(__file__).resolve().parents[2]
# The console's path, locally (<API URL>/console/) and here; also its files' key prefix.
PREFIX = CONSOLE_DIR
PRICE_CLASSES = {
    "PriceClass_100": cloudfront.PriceClass.PRICE_CLASS_100,
    "PriceClass_200": cloudfront.PriceClass.PRICE_CLASS_200,
    "PriceClass_All": cloudfront.PriceClass.PRICE_CLASS_ALL,
}

# "/" goes to the console; a path under /console/ whose last segment has no "." is one of the
# single page's own routes (its router reads location), so it gets index.html.
VIEWER_REQUEST_JS = f"""\
function handler(event) {{
  var request = event.request;
  var uri = request.uri;
  if (uri === '/' || uri === '/{PREFIX}') {{
    return {{
      statusCode: 301,
      statusDescription: 'Moved Permanently',
      headers: {{ location: {{ value: '/{PREFIX}/' }} }}
    }};
  }}
  if (uri.startsWith('/{PREFIX}/') && uri.slice(uri.lastIndexOf('/') + 1).indexOf('.') === -1) {{
    request.uri = '/{PREFIX}/index.html';
  }}
  return request;
}}
"""

# On /v1/*: the viewer's address, for the API's WAF to count console users one by one. It
# replaces any value the client sent; the edge marker (an origin custom header) is added
# by CloudFront after this, over any the client sent.
API_VIEWER_REQUEST_JS = f"""\
function handler(event) {{
  var request = event.request;
  request.headers['{VIEWER_IP_HEADER}'] = {{ value: event.viewer.ip }};
  delete request.headers['{EDGE_HEADER}'];
  return request;
}}
"""


class Console(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        api: Api,
        live: Live,
        artifacts: ArtifactsBucket,
        changes_function: lambda_.Function,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        settings = config.console
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY

        # CloudFront's standard logs are delivered with object ACLs, hence OBJECT_WRITER.
        self.logs_bucket = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.OBJECT_WRITER,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-logs", expiration=Duration.days(config.log_retention_days)
                )
            ],
            removal_policy=removal,
            auto_delete_objects=not config.retain_data,
        )
        # Not versioned: every deploy rewrites the files from the repository (which is
        # their history) and prunes the rest; old versions would only accumulate.
        self.bucket = s3.Bucket(
            self,
            "Files",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=False,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.logs_bucket,
            server_access_logs_prefix="s3-console-files/",
            # Emptied by the deployment on `cdk destroy` where data is not kept (below), so
            # no auto-delete grant joins the distribution's in the bucket policy.
            removal_policy=removal,
        )

        # Presigned artifact URLs name the bucket's regional host (<bucket>.s3.<region>.…,
        # pagefleet.runtime); the global one is allowed too, for links issued before.
        self.csp = content_security_policy(
            image_origins=[
                f"https://{artifacts.bucket.bucket_domain_name}",
                f"https://{artifacts.bucket.bucket_regional_domain_name}",
            ],
            # The origin of the live stage's URL (wss://<id>.execute-api.<region>.<suffix>/live).
            connect_origins=[
                f"wss://{live.api.api_id}.execute-api.{stack.region}.{stack.url_suffix}"
            ],
        )
        self.headers = cloudfront.ResponseHeadersPolicy(
            self,
            "SecurityHeaders",
            comment=f"pagefleet {config.stage} console: HSTS, CSP, no framing, no sniffing",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=self.csp, override=True
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                # Console URLs name jobs; nothing of them goes to S3 or anywhere else.
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER, override=True
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.days(730),
                    include_subdomains=True,
                    preload=True,
                    override=True,
                ),
            ),
        )

        self.viewer_request = self._function(
            "ViewerRequest",
            "pagefleet console: / -> /console/, the console's routes -> index.html",
            VIEWER_REQUEST_JS,
        )
        self.api_viewer_request = self._function(
            "ApiViewerRequest",
            "pagefleet console: the viewer's address for the API's WAF",
            API_VIEWER_REQUEST_JS,
        )
        self.distribution = self._distribution(config, api)
        self.url = f"https://{settings.domain_name or self.distribution.domain_name}/{PREFIX}/"
        # A job that waits for a person is notified with a link to its live view here.
        add_env(changes_function, ChangesSettings, console_url=self.url)
        self.deployment = self._deployment(config, live)
        self._acknowledge(config)

    def _function(self, construct_id: str, comment: str, code: str) -> cloudfront.Function:
        return cloudfront.Function(
            self,
            construct_id,
            comment=comment,
            code=cloudfront.FunctionCode.from_inline(code),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
        )

    def _distribution(self, config: StageConfig, api: Api) -> cloudfront.Distribution:
        settings = config.console
        stack = Stack.of(self)
        # The stage is the version and the console's paths carry it (/v1/jobs), so the origin
        # has no origin path: /v1/jobs reaches https://<api>/v1/jobs unchanged.
        api_origin = origins.HttpOrigin(
            f"{api.rest_api.rest_api_id}.execute-api.{stack.region}.{stack.url_suffix}",
            protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
            origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
            read_timeout=Duration.seconds(30),  # API Gateway's own limit is 29 s
            custom_headers={EDGE_HEADER: edge_secret()},
        )
        certificate = (
            acm.Certificate.from_certificate_arn(self, "Certificate", settings.certificate_arn)
            if settings.certificate_arn
            else None
        )
        return cloudfront.Distribution(
            self,
            "Distribution",
            comment=f"pagefleet {config.stage} console and API",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                compress=True,
                response_headers_policy=self.headers,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=self.viewer_request,
                        event_type=cloudfront.FunctionEventType.VIEWER_REQUEST,
                    )
                ],
            ),
            additional_behaviors={
                f"/{API_STAGE}/*": cloudfront.BehaviorOptions(
                    origin=api_origin,
                    # A redirected POST would lose its body: plain HTTP is refused instead.
                    viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
                    allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
                    cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
                    # Everything (Authorization, query strings) but Host, which must be the
                    # API's own for API Gateway to route the request.
                    origin_request_policy=(
                        cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER
                    ),
                    response_headers_policy=self.headers,
                    function_associations=[
                        cloudfront.FunctionAssociation(
                            function=self.api_viewer_request,
                            event_type=cloudfront.FunctionEventType.VIEWER_REQUEST,
                        )
                    ],
                )
            },
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=PRICE_CLASSES[settings.price_class],
            enable_logging=True,
            log_bucket=self.logs_bucket,
            log_file_prefix="cloudfront/",
            domain_names=[settings.domain_name] if settings.domain_name else None,
            certificate=certificate,
            minimum_protocol_version=(
                cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021 if certificate else None
            ),
        )

    def _deployment(self, config: StageConfig, live: Live) -> s3deploy.BucketDeployment:
        # Its own role with named actions; the role handed to the deployment takes no policy
        # updates, so CDK's wider grants (s3:GetObject*, s3:List*, cloudfront on "*") drop.
        self.deploy_role = iam.Role(
            self,
            "DeployRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"pagefleet {config.stage}: copies the console's files to its bucket",
        )
        self.deploy_logs = logs.LogGroup(self, "DeployLogs", retention=config.log_retention)
        deployment = s3deploy.BucketDeployment(
            self,
            "Deploy",
            destination_bucket=self.bucket,
            destination_key_prefix=f"{PREFIX}/",
            sources=[
                # A config.json of the local tree would be the local stack's: ours wins.
                s3deploy.Source.asset(str(REPO_ROOT / CONSOLE_DIR), exclude=[CONFIG_FILE]),
                s3deploy.Source.json_data(
                    CONFIG_FILE,
                    SiteConfig(
                        api_base=f"/{API_STAGE}", websocket_url=live.stage.url, stage=config.stage
                    ).as_json(),
                ),
            ],
            # The files are not content-hashed: short-lived in caches, invalidated on deploy.
            cache_control=[
                s3deploy.CacheControl.from_string(f"public, max-age={config.console.cache_seconds}")
            ],
            distribution=self.distribution,
            distribution_paths=[f"/{PREFIX}/*"],
            prune=True,
            retain_on_delete=config.retain_data,
            role=self.deploy_role.without_policy_updates(),
            log_group=self.deploy_logs,
            memory_limit=256,
        )
        self.deploy_logs.grant_write(self.deploy_role)
        # The deployment's own sources (the zipped files, the config.json document), not
        # the AWS CLI layer's asset, which Lambda reads itself.
        sources = [
            c
            for c in deployment.node.find_all()
            if isinstance(c, s3_assets.Asset) and not isinstance(c.node.scope, lambda_.LayerVersion)
        ]
        self.deploy_role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[a.bucket.arn_for_objects(a.s3_object_key) for a in sources],
            )
        )
        self.deploy_role.add_to_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn])
        )
        self.deploy_objects = self.bucket.arn_for_objects(f"{PREFIX}/*")
        self.deploy_role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                resources=[self.deploy_objects],
            )
        )
        self.deploy_role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudfront:CreateInvalidation", "cloudfront:GetInvalidation"],
                resources=[self.distribution.distribution_arn],
            )
        )
        # The copy runs only once its grants exist.
        deployment.node.add_dependency(self.deploy_role)
        return deployment

    def _acknowledge(self, config: StageConfig) -> None:
        acknowledge(
            self.logs_bucket,
            "S1",
            "This bucket holds the console bucket's S3 access logs and CloudFront's logs; "
            "logging it to itself would loop.",
        )
        acknowledge(
            self.distribution,
            "CFR1",
            "The console is for every tenant, wherever they are; the API behind it checks "
            "tenant keys.",
        )
        acknowledge(
            self.distribution,
            "CFR2",
            "A CloudFront WAF must live in us-east-1 and this stack is regional; /v1/* passes "
            "through the API stage's own regional WAF where the stage enables it (which "
            "counts each console user by the viewer address this distribution forwards), "
            "and the rest are static files.",
        )
        if not config.console.certificate_arn:
            acknowledge(
                self.distribution,
                "CFR4",
                "With the default *.cloudfront.net certificate CloudFront fixes the minimum "
                "TLS version itself; a custom domain (console.domain_name + certificate_arn) "
                "sets TLSv1.2_2021.",
            )
        # The copy's Lambda function is CDK's singleton at the stack's root.
        for handler in Stack.of(self).node.children:
            if handler.node.id.startswith("Custom::CDKBucketDeployment"):
                acknowledge(
                    handler,
                    "L1",
                    "CDK's BucketDeployment handler: aws-cdk-lib picks and tests its Python "
                    "runtime (with the AWS CLI layer), and moves it on with CDK upgrades.",
                )
        acknowledge(
            self.deploy_role,
            f"IAM5[Resource::{resource_text(self, self.deploy_objects)}]",
            "The deployment writes and prunes the console's files, whose names the console "
            "chooses, under its console/ prefix of its own bucket only.",
        )
