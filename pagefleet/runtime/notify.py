"""Builders of what follows a job: the jobs stream's consumers, live runs (WebSocket) and
notifications (the API's routes, the webhook sender)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pagefleet.adapters.dynamodb.connections import DynamoConnections
    from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries, DynamoNotifyDefaults
    from pagefleet.adapters.dynamodb.events import DynamoEventStore
    from pagefleet.adapters.notify import SecretsManagerSigningSecrets, SqsWebhookQueue
    from pagefleet.jobs.changes import ChangeConsumer
    from pagefleet.live.ports import ConnectionPoster
    from pagefleet.live.service import LiveServices
    from pagefleet.notify.sender import WebhookSender
    from pagefleet.specs.settings import (
        ApiSettings,
        CoreSettings,
        LiveSettings,
        WebhookSettings,
    )

from pagefleet.runtime.jobs import JobBuilders


@dataclass(frozen=True)
class LiveApi:
    """What the API's live and notification routes use."""

    events: DynamoEventStore
    deliveries: DynamoDeliveries
    defaults: DynamoNotifyDefaults
    secrets: SecretsManagerSigningSecrets
    connections: DynamoConnections | None
    live_url: str | None


class NotifyBuilders(JobBuilders):
    def change_consumers(self, settings: CoreSettings) -> list[ChangeConsumer]:
        from pagefleet.change_wiring import change_consumers  # its docstring says what

        return self._per("changes", settings, lambda: change_consumers(self, settings))

    def live_services(self, settings: LiveSettings) -> LiveServices:
        """What the WebSocket routes and the idle reaper use (``functions/live``)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb import DynamoJobStore
        from pagefleet.adapters.dynamodb.connections import DynamoConnections
        from pagefleet.adapters.live import ApiGatewayPoster
        from pagefleet.live.service import LiveServices

        def build() -> LiveServices:
            db = self.client("dynamodb")
            return LiveServices(
                connections=DynamoConnections(db, settings.connections_table),
                poster=ApiGatewayPoster(self.management_client(settings.live_endpoint)),
                jobs=DynamoJobStore(db, settings.jobs_table),
                events=self.event_store(settings.jobs_table),
                tenants=self.tenant_store(settings.tenants_table),
                idle_unsubscribed_s=settings.idle_unsubscribed_s,
                max_rooms=settings.max_rooms,
                connection_ttl_s=settings.connection_ttl_s,
            )

        return self._per("live", settings, build)

    def connection_poster(self, endpoint: str | None) -> ConnectionPoster | None:
        """The ``@connections`` API of the WebSocket stage at ``endpoint`` (None: none);
        the worker posts a watched job's live view frames through it."""
        if endpoint is None:
            return None
        from pagefleet.adapters.live import ApiGatewayPoster

        return ApiGatewayPoster(self.management_client(endpoint))

    def signing_secrets(self, stage: str) -> SecretsManagerSigningSecrets:
        """The tenants' webhook signing secrets (the API, the sender, the CLI)."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.notify import SecretsManagerSigningSecrets

        return self._once(
            ("signing", stage),
            lambda: SecretsManagerSigningSecrets(self.client("secretsmanager"), stage),
        )

    def live_api(self, settings: ApiSettings) -> LiveApi:
        """What the API's live and notification routes use."""
        # imported when first built: a cold start imports only what it builds
        from pagefleet.adapters.dynamodb.connections import DynamoConnections
        from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries, DynamoNotifyDefaults

        def build() -> LiveApi:
            db = self.client("dynamodb")
            table = settings.connections_table
            return LiveApi(
                events=self.event_store(settings.jobs_table),
                deliveries=DynamoDeliveries(db, settings.jobs_table),
                defaults=DynamoNotifyDefaults(db, settings.tenants_table),
                secrets=self.signing_secrets(settings.stage),
                connections=DynamoConnections(db, table) if table else None,
                live_url=settings.live_url,
            )

        return self._per("live-api", settings, build)

    def webhook_sender(self, settings: WebhookSettings) -> tuple[WebhookSender, SqsWebhookQueue]:
        """The sender and its queue (``functions/webhooks``)."""
        import httpx  # its command line imports pygments, rich and click: the sender only

        from pagefleet.adapters.dynamodb.deliveries import DynamoDeliveries
        from pagefleet.adapters.notify import SqsWebhookQueue
        from pagefleet.backoff import Backoff, Jitter
        from pagefleet.notify.sender import WebhookSender
        from pagefleet.specs.resources import WEBHOOK_ATTEMPTS
        from pagefleet.targets.egress_policy import EgressPolicy, system_lookup

        def build() -> tuple[WebhookSender, SqsWebhookQueue]:
            sender = WebhookSender(
                self.signing_secrets(settings.stage),
                DynamoDeliveries(self.client("dynamodb"), settings.jobs_table),
                policy=EgressPolicy(allow_loopback=settings.allow_loopback),
                resolve=system_lookup,
                # Never through a proxy from the environment: the checked address is the target.
                http=httpx.Client(trust_env=False),
                max_attempts=WEBHOOK_ATTEMPTS,
                backoff=Backoff(settings.backoff_base_s, settings.backoff_cap_s, Jitter.EQUAL),
                timeout_s=settings.timeout_s,
            )
            return sender, SqsWebhookQueue(self.client("sqs"), settings.queue_url)

        return self._per("webhooks", settings, build)
