"""How a process builds the live and notification parts from its settings and AWS clients.

``RUNTIME`` (``pagefleet.runtime``) calls these with itself as the client source, so every
client and adapter is built once per process and forgotten on ``RUNTIME.reset()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import boto3
from botocore.config import Config

from pagefleet.adapters.dynamodb.connections import DynamoConnections
from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries, DynamoNotifyDefaults
from pagefleet.adapters.dynamodb.events import DynamoEventStore
from pagefleet.adapters.notify import SecretsManagerSigningSecrets
from pagefleet.specs.settings import (
    ApiSettings,
    ChangesSettings,
    CoreSettings,
    LiveSettings,
    WebhookSettings,
)

# What only one runtime needs is imported where it is built (the stream reader's consumers,
# the webhook sender and its HTTP client, the WebSocket routes' services): the API imports
# this module on every cold start for ``live_api`` alone.
if TYPE_CHECKING:
    from pagefleet.adapters.notify import SqsWebhookQueue
    from pagefleet.jobs.changes import ChangeConsumer
    from pagefleet.live.service import LiveServices
    from pagefleet.notify.schedule_notices import ScheduleNotices
    from pagefleet.notify.sender import WebhookSender

T = TypeVar("T")

# Posts wait on a socket far away: a short timeout, standard retries.
_MANAGEMENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=3,
    read_timeout=5,
    max_pool_connections=32,
)


class ClientSource(Protocol):
    def client(self, service: str) -> Any: ...

    def cached(self, key: Any, build: Callable[[], T]) -> T: ...


def management_client(endpoint: str) -> Any:
    """The ``@connections`` client of a WebSocket stage (its callback URL)."""
    return boto3.session.Session().client(
        "apigatewaymanagementapi", endpoint_url=endpoint, config=_MANAGEMENT_CONFIG
    )


def live_and_notify_consumers(rt: ClientSource, settings: CoreSettings) -> list[ChangeConsumer]:
    """Live delivery, webhooks and EventBridge events, as far as the settings configure them."""
    if not isinstance(settings, ChangesSettings):
        return []
    from pagefleet.adapters.live import ApiGatewayPoster
    from pagefleet.adapters.notify import EventBridgeBus, SqsWebhookQueue
    from pagefleet.live.delivery import LiveDelivery
    from pagefleet.live.events import DEFAULT_RETENTION_S
    from pagefleet.notify.eventbridge import JobFinishedEvents
    from pagefleet.notify.webhooks import WebhookNotifier

    dynamodb = rt.client("dynamodb")
    deliveries = DynamoDeliveries(dynamodb, settings.jobs_table)
    out: list[ChangeConsumer] = []
    if settings.connections_table and settings.live_endpoint:
        out.append(
            LiveDelivery(
                DynamoConnections(dynamodb, settings.connections_table),
                ApiGatewayPoster(management_client(settings.live_endpoint)),
                messages_per_s=settings.live_messages_per_s,
            )
        )
    if settings.webhook_queue_url:
        out.append(
            WebhookNotifier(
                SqsWebhookQueue(rt.client("sqs"), settings.webhook_queue_url),
                DynamoNotifyDefaults(dynamodb, settings.tenants_table),
                deliveries,
                retention_s=DEFAULT_RETENTION_S,
            )
        )
    if settings.event_bus_name:
        out.append(
            JobFinishedEvents(
                EventBridgeBus(rt.client("events"), settings.event_bus_name),
                deliveries,
                retention_s=DEFAULT_RETENTION_S,
            )
        )
    return out


def schedule_notices(rt: ClientSource, settings: CoreSettings) -> ScheduleNotices:
    """How schedules' failed runs and turns are told (webhooks and events, as configured)."""
    from pagefleet.adapters.notify import EventBridgeBus, SqsWebhookQueue
    from pagefleet.live.events import DEFAULT_RETENTION_S
    from pagefleet.notify.eventbridge import EventOnce
    from pagefleet.notify.schedule_notices import ScheduleNotices
    from pagefleet.notify.webhooks import Outbox

    if not isinstance(settings, ChangesSettings):
        return ScheduleNotices(None, None)
    dynamodb = rt.client("dynamodb")
    deliveries = DynamoDeliveries(dynamodb, settings.jobs_table)
    outbox = (
        Outbox(
            SqsWebhookQueue(rt.client("sqs"), settings.webhook_queue_url),
            DynamoNotifyDefaults(dynamodb, settings.tenants_table),
            deliveries,
            retention_s=DEFAULT_RETENTION_S,
        )
        if settings.webhook_queue_url
        else None
    )
    events = (
        EventOnce(
            EventBridgeBus(rt.client("events"), settings.event_bus_name),
            deliveries,
            retention_s=DEFAULT_RETENTION_S,
        )
        if settings.event_bus_name
        else None
    )
    return ScheduleNotices(outbox, events)


def live_services(rt: ClientSource, settings: LiveSettings) -> LiveServices:
    """What the WebSocket routes and the idle reaper use (``functions/live``)."""
    from pagefleet.adapters.dynamodb import DynamoJobStore, DynamoTenantStore
    from pagefleet.adapters.live import ApiGatewayPoster
    from pagefleet.live.service import LiveServices

    def build() -> LiveServices:
        dynamodb = rt.client("dynamodb")
        return LiveServices(
            connections=DynamoConnections(dynamodb, settings.connections_table),
            poster=ApiGatewayPoster(management_client(settings.live_endpoint)),
            jobs=DynamoJobStore(dynamodb, settings.jobs_table),
            events=DynamoEventStore(dynamodb, settings.jobs_table),
            tenants=DynamoTenantStore(dynamodb, settings.tenants_table),
            idle_unsubscribed_s=settings.idle_unsubscribed_s,
            max_rooms=settings.max_rooms,
            connection_ttl_s=settings.connection_ttl_s,
        )

    return rt.cached(("live", settings.model_dump_json()), build)


@dataclass(frozen=True)
class LiveApi:
    """What the API's live and notification routes use."""

    events: DynamoEventStore
    deliveries: DynamoDeliveries
    defaults: DynamoNotifyDefaults
    secrets: SecretsManagerSigningSecrets
    connections: DynamoConnections | None
    live_url: str | None
    allow_loopback: bool


def live_api(rt: ClientSource, settings: ApiSettings) -> LiveApi:
    def build() -> LiveApi:
        dynamodb = rt.client("dynamodb")
        return LiveApi(
            events=DynamoEventStore(dynamodb, settings.jobs_table),
            deliveries=DynamoDeliveries(dynamodb, settings.jobs_table),
            defaults=DynamoNotifyDefaults(dynamodb, settings.tenants_table),
            secrets=SecretsManagerSigningSecrets(rt.client("secretsmanager"), settings.stage),
            connections=(
                DynamoConnections(dynamodb, settings.connections_table)
                if settings.connections_table
                else None
            ),
            live_url=settings.live_url,
            allow_loopback=settings.allow_loopback,
        )

    return rt.cached(("live-api", settings.model_dump_json()), build)


def webhook_sender(
    rt: ClientSource, settings: WebhookSettings
) -> tuple[WebhookSender, SqsWebhookQueue]:
    """The sender and its queue (``functions/webhooks``)."""
    import httpx

    from pagefleet.adapters.notify import SqsWebhookQueue
    from pagefleet.notify.sender import WebhookSender
    from pagefleet.specs.resources import WEBHOOK_ATTEMPTS
    from pagefleet.targets.egress_policy import EgressPolicy, system_lookup

    def build() -> tuple[WebhookSender, SqsWebhookQueue]:
        sender = WebhookSender(
            SecretsManagerSigningSecrets(rt.client("secretsmanager"), settings.stage),
            DynamoDeliveries(rt.client("dynamodb"), settings.jobs_table),
            policy=EgressPolicy(allow_loopback=settings.allow_loopback),
            resolve=system_lookup,
            # Never through a proxy from the environment: the checked address is the target.
            http=httpx.Client(trust_env=False),
            max_attempts=WEBHOOK_ATTEMPTS,
            backoff_base_s=settings.backoff_base_s,
            backoff_cap_s=settings.backoff_cap_s,
            timeout_s=settings.timeout_s,
        )
        return sender, SqsWebhookQueue(rt.client("sqs"), settings.queue_url)

    return rt.cached(("webhooks", settings.model_dump_json()), build)
