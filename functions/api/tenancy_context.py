"""What the tenancy routes need besides ``functions.api.context``: the tenancy services,
the job data store, the sessions archive, and who is acting (for audit records)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from functions.api.context import api_settings, event_of, tenant_id
from pagefleet.runtime import RUNTIME

# Imported by the routes that use them, on their first call: a cold start for another
# route does not build the tenancy services' modules.
if TYPE_CHECKING:
    from pagefleet.adapters.job_data import AwsJobData
    from pagefleet.tenancy.service import Tenancy
    from pagefleet.tenancy.sessions import SessionArchive


def tenancy() -> Tenancy:
    return RUNTIME.tenancy(api_settings())


def data() -> AwsJobData:
    from pagefleet.tenant_runtime import job_data

    return job_data(RUNTIME.client("dynamodb"), RUNTIME.client("s3"), api_settings())


def sessions() -> SessionArchive:
    from pagefleet.tenancy.sessions import SessionArchive

    return SessionArchive(RUNTIME.client("s3"), api_settings().artifacts_bucket)


def actor(router: Router) -> str:
    """The caller as audit records name it: ``tenant:key_id`` of its API key."""
    authorizer: dict[str, Any] = dict(event_of(router).request_context.authorizer or {})
    return f"{tenant_id(router)}:{authorizer.get('key_id') or '?'}"
