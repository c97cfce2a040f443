"""moto server as pagefleet's embedded AWS, with DynamoDB's write atomicity restored.

DynamoDB evaluates a condition expression and applies the write atomically; moto's
threaded server does not (two concurrent conditional updates can both pass their check),
which would let two workers claim one job. Serializing moto's DynamoDB requests restores
the guarantee the job lifecycle is built on. Run as ``python -m pagefleet.local.embedded_aws``
with moto server's own arguments.
"""

from __future__ import annotations

import threading
from typing import Any

_DYNAMODB_LOCK = threading.RLock()


def make_dynamodb_atomic() -> None:
    """Patch moto (in this process) so each DynamoDB request runs alone. Idempotent."""
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler, "_pagefleet_atomic", False):
        return
    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with _DYNAMODB_LOCK:
            return original(self)

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]
    DynamoHandler._pagefleet_atomic = True  # type: ignore[attr-defined]


def main() -> None:
    make_dynamodb_atomic()
    from moto.server import main as moto_main

    moto_main()


if __name__ == "__main__":
    main()
