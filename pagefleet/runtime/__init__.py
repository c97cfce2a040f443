"""The one place a process builds its settings, AWS clients, adapters and services.

The composition roots (each Lambda handler module and the API's ``functions.api.context``,
the worker's ``browser_task.__main__``, the CLI's ``pagefleet.cli.common``, the local
stack) ask ``RUNTIME`` for what they need and hand it on; nothing below them reaches for it
(an import-linter contract). It builds each thing once, on first use (never at import), and
keeps it for the life of the process, as a Lambda execution environment keeps its globals
warm. Tests and the local stack call ``RUNTIME.reset()`` to forget everything built against
another endpoint or environment.

``AWS_ENDPOINT_URL`` (set by the local stack) points every client at the embedded AWS, so
no code path differs between the local stack and AWS.

Each builder imports its adapters and services when it is first called: a function's cold
start imports only what its first request builds (all of them at import would add ~0.35 s of
CPU to every cold start, measured with ``.pyc``; bench/latency.py, docs/performance.md).
"""

from __future__ import annotations

from pagefleet.runtime.notify import LiveApi, NotifyBuilders


class Runtime(NotifyBuilders):
    """Every builder, over one cache: ``base`` (settings, clients), ``tenants``, ``jobs``,
    ``notify``, each module building on the one before it."""


RUNTIME = Runtime()

__all__ = ["RUNTIME", "LiveApi", "Runtime"]
