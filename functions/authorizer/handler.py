"""TOKEN authorizer: maps `Authorization: Bearer <api key>` to a tenant.

The policy allows every route of the API, because API Gateway caches it per token: a
policy naming only the first method called would refuse the tenant's next call.
"""

from __future__ import annotations

from typing import Any

from functions.cold_start import collector_paused

with collector_paused():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.metrics import EphemeralMetrics

    from functions.lambda_context import lambda_entry
    from functions.snapstart import register as register_snapstart_hooks
    from functions.xray import function_tracer
    from pagefleet.errors import Unauthorized
    from pagefleet.runtime import RUNTIME
    from pagefleet.specs import metrics_names
    from pagefleet.specs.settings import AuthorizerSettings
    from pagefleet.tenancy.api_keys import authenticate

# The function runs with SnapStart (infra/constructs/api.py).
register_snapstart_hooks(RUNTIME.reset)

SERVICE = "pagefleet-authorizer"
logger = Logger(service=SERVICE)
metrics = EphemeralMetrics(namespace=metrics_names.runtime_namespace(), service=SERVICE)
tracer = function_tracer(SERVICE)
# A TOKEN authorizer's event has no request id; a REQUEST authorizer's has one.
CORRELATION_ID_PATH = "requestContext.requestId"


def api_wildcard_arn(method_arn: str) -> str:
    # arn:aws:execute-api:region:account:api-id/stage/METHOD/path -> .../stage/*
    prefix, _, rest = method_arn.partition(":execute-api:")
    parts = rest.split("/")
    if len(parts) < 2:
        return method_arn
    return f"{prefix}:execute-api:{parts[0]}/{parts[1]}/*"


def _policy(principal: str, effect: str, resource: str, context: dict[str, str]) -> dict[str, Any]:
    return {
        "principalId": principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": resource}],
        },
        "context": context,
    }


@lambda_entry(SERVICE)
@logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH)
@tracer.capture_lambda_handler(capture_response=False)  # the policy names the tenant
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings = RUNTIME.settings(AuthorizerSettings)
    token = str(event.get("authorizationToken") or "")
    scheme, _, api_key = token.partition(" ")
    if scheme.lower() != "bearer" or not api_key.strip():
        # API Gateway turns exactly this message into a 401.
        raise Exception("Unauthorized")
    try:
        record = authenticate(RUNTIME.tenant_store(settings.tenants_table), api_key.strip())
    except Unauthorized:
        logger.info("api key refused")
        raise Exception("Unauthorized") from None
    logger.append_keys(tenant_id=record.tenant_id, key_id=record.key_id)
    return _policy(
        principal=f"{record.tenant_id}:{record.key_id}",
        effect="Allow",
        resource=api_wildcard_arn(str(event.get("methodArn", "*"))),
        context={
            "tenant_id": record.tenant_id,
            "key_id": record.key_id,
            "admin": "true" if record.admin else "false",
        },
    )
