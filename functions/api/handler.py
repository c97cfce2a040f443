"""API Lambda entry point: settle the body, then let the resolver route the request."""

from __future__ import annotations

from typing import Any

from functions.cold_start import collector_paused

with collector_paused():
    from functions.api.app import app
    from functions.api.context import api_settings, logger, metrics, tracer
    from functions.api.request_body import BodyRefused, normalise
    from functions.lambda_context import lambda_entry
    from functions.snapstart import register as register_snapstart_hooks
    from pagefleet.runtime import RUNTIME

# The function runs with SnapStart (infra/constructs/api.py).
register_snapstart_hooks(RUNTIME.reset)

# The client's X-Correlation-Id, else API Gateway's request id. API Gateway keeps the
# client's header case and JMESPath matches keys exactly, hence both spellings.
CORRELATION_ID_PATH = (
    'headers."X-Correlation-Id" || headers."x-correlation-id" || requestContext.requestId'
)


@lambda_entry("pagefleet-api")
@logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings = api_settings()  # validated on the first invocation (cold start)
    try:
        event = normalise(event, max_bytes=settings.max_request_bytes)
    except BodyRefused as refused:
        logger.info("request body refused", extra={"reason": str(refused)})
        return refused.response
    return app.resolve(event, context)
