"""API: REST API with the tenant-key Lambda authorizer in front of the API function.

The API function's Powertools resolver owns the route table (one ``{proxy+}`` integration),
so the routes API Gateway serves and the resolver's OpenAPI description cannot disagree.
Per-tenant limits (submissions per minute, queued and running jobs, request size → 413)
are enforced by the API function against the tenants table; API Gateway adds stage-wide
throttling and, when configured, a WAF budget per user (``api_firewall``).

No API Gateway request validator: with one ``{proxy+}`` method there is no per-route
method to give a model, so one would validate nothing. The resolver validates every
body, path and query against the route's models and answers 4xx naming the field.
"""

from __future__ import annotations

import json

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import grants
from infra.config import StageConfig
from infra.nag import acknowledge
from pagefleet.specs.gateway import GATEWAY_RESPONSES, PUBLIC_ROUTES, response_template
from pagefleet.specs.resources import API_STAGE, DEFAULT_POOL
from pagefleet.specs.settings import ApiSettings, AuthorizerSettings

from .api_account import ApiGatewayAccount
from .api_firewall import ApiFirewall
from .artifacts import ArtifactsBucket
from .job_queues import JobQueues
from .job_store import JobStore
from .lambda_factory import LambdaFactory
from .schedules import Schedules

STAGE_NAME = API_STAGE  # the version: https://<api>/v1/<route>
# The authorizer reads the tenant key from this header ("Bearer <key>" or the bare key).
AUTH_HEADER = "Authorization"

ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "time": "$context.requestTime",
    "ip": "$context.identity.sourceIp",
    "method": "$context.httpMethod",
    "path": "$context.path",
    "status": "$context.status",
    "bytes": "$context.responseLength",
    "latencyMs": "$context.responseLatency",
    "tenant": "$context.authorizer.tenant_id",
    "authorizerError": "$context.authorizer.error",
    "integrationError": "$context.integration.error",
    "waf": "$context.waf.status",
}


def pricing_worker(config: StageConfig) -> dict[str, object]:
    """The standard pool's task, as the price table's ``Worker`` (for usage costs)."""
    pool = config.pool(DEFAULT_POOL)
    return {
        "vcpu": pool.cpu / 1024,
        "memory_gb": pool.memory_mib / 1024,
        "slots": pool.concurrency,
        "architecture": config.architecture_of(DEFAULT_POOL),
        "spot": pool.spot,
    }


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        functions: LambdaFactory,
        store: JobStore,
        queues: JobQueues,
        artifacts: ArtifactsBucket,
        schedules: Schedules,
        tenancy_env: dict[str, str],
        account: ApiGatewayAccount,
    ) -> None:
        super().__init__(scope, construct_id)

        self.handler = functions.function(
            "api",
            settings_cls=ApiSettings,
            description="pagefleet HTTPS API: submit, list, get, cancel jobs; artifact links",
            timeout_seconds=29,
            memory_mib=1024,
            snap_start=True,  # cold starts resume from a snapshot of the initialised handler
            env={
                "jobs_table": store.jobs.table_name,
                "tenants_table": store.tenants.table_name,
                "artifacts_bucket": artifacts.bucket.bucket_name,
                "queue_url_prefix": tenancy_env["queue_url_prefix"],
                "queue_urls": tenancy_env["queue_urls"],
                "stage": config.stage,
                "max_request_bytes": str(config.max_request_bytes),
                "default_pool": DEFAULT_POOL,
                "usage_table": tenancy_env["usage_table"],
                "tenant_defaults": tenancy_env["tenant_defaults"],
                "pools": tenancy_env["pools"],
                "pricing_worker": json.dumps(pricing_worker(config)),
                **schedules.api_settings(),
            },
        )
        schedules.grant_manage(self.handler)
        grants.table(self.handler, store.jobs, grants.JOBS_API)
        grants.table(self.handler, store.tenants, grants.TENANTS_QUOTA)
        for q in queues.all:
            grants.queue(self.handler, q.queue, grants.QUEUE_SEND)
        # Presigned GET links are signed with the function's credentials.
        grants.objects(self.handler, artifacts.bucket, ("GetObject",))

        self.authorizer_function = functions.function(
            "authorizer",
            settings_cls=AuthorizerSettings,
            description="pagefleet API key authorizer: key hash -> tenant_id",
            timeout_seconds=5,
            memory_mib=512,
            snap_start=True,
            env={"tenants_table": store.tenants.table_name},
        )
        grants.table(self.authorizer_function, store.tenants, grants.TENANTS_READ)
        self.authorizer = apigw.TokenAuthorizer(
            self,
            "TenantKeyAuthorizer",
            handler=functions.alias("authorizer"),
            identity_source=apigw.IdentitySource.header(AUTH_HEADER),
            # A revoked key stops working within this many seconds.
            results_cache_ttl=Duration.seconds(config.authorizer_cache_seconds),
        )

        self.access_logs = logs.LogGroup(self, "AccessLogs", retention=config.log_retention)
        self.rest_api = apigw.LambdaRestApi(
            self,
            "RestApi",
            # API Gateway's metrics name the API by this (ApiName): every stage would be
            # "RestApi" in one account, and each stage's 5xx alarm would sum them all.
            rest_api_name=f"pagefleet-{config.stage}",
            handler=functions.alias("api"),
            proxy=True,
            description=f"pagefleet {config.stage} API",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            cloud_watch_role=False,  # the account's logging role: ApiGatewayAccount
            deploy_options=apigw.StageOptions(
                stage_name=STAGE_NAME,
                throttling_rate_limit=config.api_throttle_rate,
                throttling_burst_limit=config.api_throttle_burst,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FORMAT)),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                metrics_enabled=True,
                tracing_enabled=True,
            ),
            default_method_options=apigw.MethodOptions(
                authorizer=self.authorizer,
                authorization_type=apigw.AuthorizationType.CUSTOM,
            ),
        )
        # Execution logs (logging_level above): API Gateway writes them to a group of this
        # name, creating it without retention and outside the stack if it does not exist.
        # Made here first (the stage waits for it), it expires and goes with the stack.
        self.execution_logs = logs.LogGroup(
            self,
            "ExecutionLogs",
            log_group_name=f"API-Gateway-Execution-Logs_{self.rest_api.rest_api_id}/{STAGE_NAME}",
            retention=config.log_retention,
        )
        self.rest_api.deployment_stage.node.add_dependency(self.execution_logs)
        self._public_routes(functions)
        self._gateway_responses()
        self.stage = self.rest_api.deployment_stage
        account.logs_through(self.stage)
        self.firewall = (
            ApiFirewall(self, "Firewall", config=config, stage=self.stage) if config.waf else None
        )
        self._acknowledge(config)

    def _public_routes(self, functions: LambdaFactory) -> None:
        """A resource per keyless route, with only its method and no authorizer (more
        specific than ``{proxy+}``, so API Gateway routes it here). ``root.add_resource``
        refuses on a proxying LambdaRestApi; a Resource given the root as parent does not."""
        integration = apigw.LambdaIntegration(functions.alias("api"))
        for method, path in PUBLIC_ROUTES:
            resource = apigw.Resource(
                self,
                "Public" + "".join(c for c in path.title() if c.isalnum()),
                parent=self.rest_api.root,
                path_part=path.strip("/"),
            )
            public = resource.add_method(
                method, integration, authorization_type=apigw.AuthorizationType.NONE
            )
            acknowledge(
                public,
                "APIG4",
                f"{method} {path} is public on purpose: the API's own description, which "
                "clients and tools read before they hold a key.",
            )
            acknowledge(public, "COG4", "A public route: no authorizer of any kind.")

    def _gateway_responses(self) -> None:
        """API Gateway's own answers (a refused key, throttling, a timeout) in the API's
        error shape instead of ``{"message": ...}`` (pagefleet/specs/gateway.py)."""
        for response in GATEWAY_RESPONSES:
            self.rest_api.add_gateway_response(
                f"Gateway{response.type.title().replace('_', '')}",
                type=apigw.ResponseType.of(response.type),
                status_code=str(response.status) if response.status else None,
                templates={"application/json": response_template(response)},
            )

    def _acknowledge(self, config: StageConfig) -> None:
        acknowledge(
            self.rest_api,
            "COG4",
            "Clients are machines holding tenant API keys, not Cognito users: every method "
            "goes through the tenant-key Lambda authorizer.",
        )
        acknowledge(
            self.rest_api,
            "APIG2",
            "One {proxy+} method, no per-route models for a validator to check: the API "
            "function's resolver validates every request against its route's models and "
            "answers 4xx naming the field.",
        )
        if not config.waf:
            acknowledge(
                self.stage,
                "APIG3",
                f"WAF is off in the {config.stage} stage config to save its cost; "
                "stage throttling and per-tenant quotas still apply.",
            )

    @property
    def functions(self) -> tuple[lambda_.Function, lambda_.Function]:
        return (self.handler, self.authorizer_function)
