"""What reacts to job changes, built for the jobs stream's one reader.

Split from ``pagefleet.runtime`` (which calls it, once per process): it is given the
runtime's builders through ``Parts`` rather than importing the runtime, which only the
composition roots may.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pagefleet.adapters.job_data import AwsJobData
    from pagefleet.jobs.changes import ChangeConsumer
    from pagefleet.jobs.service import JobServices
    from pagefleet.schedules.service import ScheduleStore
    from pagefleet.specs.settings import CoreSettings
    from pagefleet.tenancy.service import Tenancy


class Parts(Protocol):
    """The runtime's builders these consumers are made of."""

    def client(self, service: str) -> Any: ...
    def management_client(self, endpoint: str) -> Any: ...
    def job_services(self, settings: CoreSettings) -> JobServices: ...
    def job_data(self, settings: CoreSettings) -> AwsJobData: ...
    def tenancy(self, settings: CoreSettings) -> Tenancy: ...
    def schedule_store(self, settings: CoreSettings) -> ScheduleStore: ...


def change_consumers(parts: Parts, settings: CoreSettings) -> list[ChangeConsumer]:
    """Dependants released, expiry set, schedules' health kept, and live delivery,
    webhooks and EventBridge events as far as the settings configure them."""
    # imported when first built: a cold start imports only what it builds
    from pagefleet.adapters.dynamodb.connections import DynamoConnections
    from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries, DynamoNotifyDefaults
    from pagefleet.adapters.live import ApiGatewayPoster
    from pagefleet.adapters.notify import EventBridgeBus, SqsWebhookQueue
    from pagefleet.jobs.dependencies import DependencyRelease
    from pagefleet.live.delivery import LiveDelivery
    from pagefleet.live.events import DEFAULT_RETENTION_S
    from pagefleet.notify.eventbridge import JobFinishedEvents
    from pagefleet.notify.routing import CachedDefaults
    from pagefleet.notify.schedule_notices import ScheduleNotices
    from pagefleet.notify.webhooks import WebhookNotifier
    from pagefleet.schedules.watch import ScheduleWatch
    from pagefleet.specs.settings import ChangesSettings
    from pagefleet.tenancy.retention import RetentionConsumer

    out: list[ChangeConsumer] = [
        DependencyRelease(parts.job_services(settings).lifecycle),
        RetentionConsumer(parts.job_data(settings), parts.tenancy(settings).limits),
    ]
    outbox = events = None
    if isinstance(settings, ChangesSettings):
        db = parts.client("dynamodb")
        deliveries = DynamoDeliveries(db, settings.jobs_table)
        if settings.connections_table and settings.live_endpoint:
            poster = ApiGatewayPoster(parts.management_client(settings.live_endpoint))
            connections = DynamoConnections(db, settings.connections_table)
            rate = settings.live_messages_per_s
            out.append(LiveDelivery(connections, poster, messages_per_s=rate))
        if settings.webhook_queue_url:
            queue = SqsWebhookQueue(parts.client("sqs"), settings.webhook_queue_url)
            # Read once per tenant every few seconds, not for each job that ends.
            defaults = CachedDefaults(DynamoNotifyDefaults(db, settings.tenants_table))
            notifier = WebhookNotifier(
                queue,
                defaults,
                deliveries,
                retention_s=DEFAULT_RETENTION_S,
                console_url=settings.console_url,
            )
            out.append(notifier)
            outbox = notifier.outbox  # schedules' notices go out the same way
        if settings.event_bus_name:
            bus = EventBridgeBus(parts.client("events"), settings.event_bus_name)
            finished = JobFinishedEvents(
                bus, deliveries, retention_s=DEFAULT_RETENTION_S, console_url=settings.console_url
            )
            out.append(finished)
            events = finished.events
    # Schedules' health (a monitor's baseline, alerts): kept even unnotified, told as configured.
    out.insert(2, ScheduleWatch(parts.schedule_store(settings), ScheduleNotices(outbox, events)))
    return out
