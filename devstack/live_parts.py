"""The local stack's live and notification parts, as on AWS:

- the WebSocket API (``devstack.websocket``): ``ws://127.0.0.1:<port>/live``, invoking the
  real ``functions/live`` handler with API Gateway's WebSocket events;
- its ``@connections`` management endpoint on another loopback port: the ``live_endpoint``
  that the live function and the jobs stream's reader post to through boto3;
- the EventBridge ``rate(1 minute)`` rule that runs the live function's idle reaper (here
  every ``reaper_interval_s``);
- the webhook queue's event source mapping: SQS -> ``functions/webhooks``;
- EventBridge itself is moto's (``event_bus_name`` = ``default``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from devstack.gateway import LocalGateway
from devstack.iam.local import LocalIam
from devstack.lambda_env import LambdaFunction
from devstack.loopback import reserve_loopback_port
from devstack.pollers import DeadLetterPoller, Timer, scheduled_event, stop_together
from devstack.provision import Provisioned
from devstack.websocket.management import ConnectionsApp
from devstack.websocket.server import IDLE_TIMEOUT_S, MAX_AGE_S, LocalWebSocketApi

log = logging.getLogger("devstack")

STAGE = "live"  # infra/constructs/live.py deploys the WebSocket API to this stage


@dataclass(frozen=True)
class LiveOptions:
    reaper_interval_s: float = 30.0
    # API Gateway's own limits (fixed on AWS; tests shorten them).
    idle_timeout_s: float = IDLE_TIMEOUT_S
    max_age_s: float = MAX_AGE_S


def _prewarm(function: LambdaFunction) -> None:
    try:
        function.prewarm()
    except Exception:  # it shows again, with its cause, on the first real invocation
        log.warning("could not prewarm %s", function.name, exc_info=True)


class LiveParts:
    def __init__(self, options: LiveOptions | None = None) -> None:
        self.options = options or LiveOptions()
        # Held up front: the functions' settings name the ports before anything serves them.
        self._websocket_sock = reserve_loopback_port()
        self._management_sock = reserve_loopback_port()
        self.websocket_port = int(self._websocket_sock.getsockname()[1])
        self.management_port = int(self._management_sock.getsockname()[1])
        self.websocket: LocalWebSocketApi | None = None
        self.management: LocalGateway | None = None
        self.reaper: Timer | None = None
        self.webhooks: DeadLetterPoller | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.websocket_port}/{STAGE}"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.management_port}/{STAGE}"

    def settings(self, provisioned: Provisioned) -> dict[str, Any]:
        """Settings fields the live, stream reader, webhook and API functions read."""
        return {
            "connections_table": provisioned.connections_table,
            "live_endpoint": self.endpoint,
            "live_url": self.url,
            "webhook_queue_url": provisioned.webhook_queue_url,
            "queue_url": provisioned.webhook_queue_url,
            "event_bus_name": "default",
        }

    # Local development: webhooks may go to loopback receivers (as the worker's browser may).
    lambda_env = {"PAGEFLEET_ALLOW_LOOPBACK": "true"}

    def start(
        self,
        functions: dict[str, LambdaFunction],
        provisioned: Provisioned,
        iam: LocalIam | None = None,
    ) -> LiveParts:
        """With ``iam``, ``@connections`` calls are checked and the webhook queue is read
        with the webhook function's role (its event source mapping's on AWS)."""
        iam = iam or LocalIam.off()
        live = functions["live"]
        # Warm environments: a follower's first message should not wait for a cold start.
        warming = [
            threading.Thread(target=_prewarm, args=(functions[name],), daemon=True)
            for name in ("live", "job_changes", "webhooks")
        ]
        for thread in warming:
            thread.start()
        self.websocket = LocalWebSocketApi(
            live.invoke,
            sock=self._websocket_sock,
            stage=STAGE,
            idle_timeout_s=self.options.idle_timeout_s,
            max_age_s=self.options.max_age_s,
        ).start()
        self.management = LocalGateway(
            [ConnectionsApp(self.websocket, iam.checker)], sock=self._management_sock
        ).start()
        self.reaper = Timer(
            "live-reaper", self.options.reaper_interval_s, lambda: live.invoke(scheduled_event())
        ).start()
        # The webhook queue's event source mapping (the DLQ poller is a plain SQS one).
        self.webhooks = DeadLetterPoller(
            {"webhooks": provisioned.webhook_queue_url},
            wait_s=1,
            function=functions["webhooks"],
            aws=iam.clients("function/webhooks"),
        ).start()
        for thread in warming:
            thread.join(60)
        # ...and their clients built (Lambda keeps them between invocations too).
        for name, event in (
            ("job_changes", {"Records": []}),
            ("webhooks", {"Records": []}),
            ("live", scheduled_event()),
        ):
            try:
                functions[name].invoke(event)
            except Exception:
                log.warning("warming %s failed", name, exc_info=True)
        return self

    def stop(self) -> None:
        parts = (self.reaper, self.webhooks, self.websocket, self.management)
        stop_together(part.stop for part in parts if part is not None)
        self.reaper = self.webhooks = None
        self.websocket = None
        self.management = None
        # The servers close the sockets they took; these close them if never started.
        self._websocket_sock.close()
        self._management_sock.close()
