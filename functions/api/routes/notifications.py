"""Notification routes: a job's webhook deliveries, the tenant's default webhook and its
signing secret."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from functions.api.context import documented, live, respond, services, tenant_id
from functions.api.routes.jobs import JOB_ID
from pagefleet.api.notify import DeliveryList, NotifySettings, NotifySettingsRequest, SigningSecret
from pagefleet.jobs.service import get_job

router = Router()


@router.get(
    "/jobs/<job_id>/deliveries",
    summary="A job's webhook deliveries: every attempt, oldest first",
    responses=documented({200: ("the attempts", DeliveryList)}, 404),
    tags=["notifications"],
)
def list_deliveries(job_id: JOB_ID) -> Response[str]:
    tenant = tenant_id(router)
    get_job(services(), tenant, job_id, consistent=False)  # 404: another tenant's, or gone
    attempts = live().deliveries.attempts(tenant, job_id)
    return respond(200, DeliveryList(job_id=job_id, deliveries=attempts))


@router.get(
    "/notifications",
    summary="The tenant's default completion webhook",
    responses=documented({200: ("the settings", NotifySettings)}),
    tags=["notifications"],
)
def get_notifications() -> Response[str]:
    return respond(200, NotifySettings(webhook=live().defaults.get(tenant_id(router))))


@router.put(
    "/notifications",
    summary="Set (or clear, with null) the tenant's default completion webhook",
    responses=documented({200: ("the settings", NotifySettings)}, 400, 422),
    tags=["notifications"],
)
def put_notifications(request: Annotated[NotifySettingsRequest, Body()]) -> Response[str]:
    tenant = tenant_id(router)
    if request.webhook is not None:
        services().policy.check_webhook(request.webhook, field="webhook")
    live().defaults.put(tenant, request.webhook)
    return respond(200, NotifySettings(webhook=request.webhook))


@router.get(
    "/notifications/signing-secret",
    summary="The tenant's webhook signing secret (made on first use)",
    responses=documented({200: ("the secret", SigningSecret)}),
    tags=["notifications"],
)
def get_signing_secret() -> Response[str]:
    return respond(200, SigningSecret(secret=live().secrets.get(tenant_id(router))))


@router.post(
    "/notifications/signing-secret/rotate",
    summary="Replace the tenant's webhook signing secret",
    responses=documented({200: ("the new secret", SigningSecret)}),
    tags=["notifications"],
)
def rotate_signing_secret() -> Response[str]:
    return respond(200, SigningSecret(secret=live().secrets.rotate(tenant_id(router))))
