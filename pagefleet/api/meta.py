"""The API about itself and the fleet: health, the fleet's figures, and MCP's answers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pagefleet.view import View


class HealthView(View):
    """What ``GET /v1/health`` answers, with no API key: the deployed release and stage."""

    status: Literal["ok"] = Field(description="the API function answered")
    version: str = Field(description="the pagefleet release deployed (CHANGELOG.md)")
    stage: str = Field(description="the stage this API belongs to (dev, prod...)")


class PercentilesView(View):
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class FleetStatsView(View):
    """The tenant's fleet: what waits and runs now, how jobs ended in the window and how
    long they took (seconds)."""

    window_s: int
    counts: dict[str, int] = Field(
        description="jobs in each waiting or running state now, and in needs_review"
    )
    oldest_queued_age_s: float | None = Field(
        default=None, description="how long the oldest queued job has waited"
    )
    finished: dict[str, int] = Field(description="jobs that ended in the window, by state")
    success_rate: float | None = None
    failure_rate: float | None = None
    timeout_rate: float | None = None
    retry_rate: float | None = Field(
        default=None, description="share of ended jobs that needed more than one attempt"
    )
    duration_s: PercentilesView
    queue_delay_s: PercentilesView = Field(description="from ready to the first attempt's start")
    sampled: int = Field(description="jobs made in the window that the figures are taken from")


class McpAnswer(View):
    """What ``POST /v1/mcp`` answers a JSON-RPC request: its result or its error (MCP's
    Streamable HTTP transport, JSON answers). A notification is answered 202, no body."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: int | str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
