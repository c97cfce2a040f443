"""Following jobs live: where the WebSocket is, and a ticket to connect from a browser."""

from __future__ import annotations

from pydantic import Field

from pagefleet.view import View


class LiveInfo(View):
    """Where and how to follow jobs live (README: "Follow a job live")."""

    url: str | None = Field(description="wss URL of the WebSocket API; null: not deployed")
    idle_timeout_s: int = Field(description="API Gateway closes a silent socket after this")
    max_age_s: int = Field(description="API Gateway closes every socket after this")
    ping_interval_s: int = Field(description='send {"action": "ping"} at least this often')


class LiveTicket(View):
    """A single-use ticket to connect without a header (browsers): ``url?ticket=...``."""

    ticket: str
    expires_at: str
    expires_in: int
    url: str | None = Field(description="the live URL with this ticket, ready to open")
