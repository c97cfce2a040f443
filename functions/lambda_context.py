"""A stand-in Lambda context for handlers invoked off Lambda (tests, the local pollers).

Powertools' ``inject_lambda_context`` reads the context's function name, memory, ARN and
request id; off Lambda a caller may pass ``None``, so ``lambda_entry`` fills one in.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

R = TypeVar("R")


@dataclass
class LocalContext:
    function_name: str
    memory_limit_in_mb: int = 128
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:local:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def lambda_entry(
    function_name: str,
) -> Callable[[Callable[[Any, Any], R]], Callable[[Any, Any], R]]:
    """Outermost decorator of a handler: a ``None`` context becomes a ``LocalContext``."""

    def decorate(handler: Callable[[Any, Any], R]) -> Callable[[Any, Any], R]:
        @functools.wraps(handler)
        def entry(event: Any, context: Any) -> R:
            return handler(event, context if context is not None else LocalContext(function_name))

        return entry

    return decorate
