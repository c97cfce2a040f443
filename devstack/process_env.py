"""The stack's changes to this process's environment, undone on stop.

In-process code (tests, benchmarks, the CLI) reaches the embedded AWS through the
environment, as a Lambda function does; what the stack set there, it puts back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Variables that could send a client somewhere else than the embedded AWS.
_ELSEWHERE = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SECURITY_TOKEN")


class EnvOverlay:
    """Set, and on ``restore`` put back, variables of ``os.environ``."""

    def __init__(self) -> None:
        self._saved: dict[str, str | None] = {}

    def set(self, values: Mapping[str, str | None]) -> None:
        """Set each variable (None: remove it), remembering its first value."""
        for name, value in values.items():
            self._saved.setdefault(name, os.environ.get(name))
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def only_endpoint(self, aws: Mapping[str, str]) -> None:
        """``aws`` (the embedded AWS's endpoint and keys), and nothing that points elsewhere:
        no profile, no session token, no per-service endpoint."""
        self.set(aws)
        per_service = [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL_")]
        self.set(dict.fromkeys([*_ELSEWHERE, *per_service]))

    def restore(self) -> None:
        saved, self._saved = self._saved, {}
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
