"""The ECS agent's task scale-in protection endpoint, on loopback, as strict as ECS.

Inside a Fargate task the ECS agent serves ``$ECS_AGENT_URI/task-protection/v1/state``
(https://docs.aws.amazon.com/AmazonECS/latest/userguide/task-scale-in-protection-endpoint.html);
the worker calls it (``browser_task.observe.task_protection``). This stand-in answers as the
agent and ECS do, where the worker depends on them:

- ``PUT`` with ``{"ProtectionEnabled": bool, "ExpiresInMinutes": int}`` protects the task
  for that many minutes (120 when not given) or removes protection, and answers
  ``{"protection": {"ExpirationDate", "ProtectionEnabled", "TaskArn"}}``;
- a body the agent cannot decode (not a JSON object, a field it does not know, a value of
  the wrong type) or without ``ProtectionEnabled``, and a period outside the 1 to 2,880
  minutes ECS takes, are answered ``400`` with ``{"error": {"Code":
  "InvalidParameterException", ...}}``, protecting nothing;
- a task that belongs to no service (``in_service=False``) is answered ``400`` with
  ``{"failure": {"Reason": "TASK_NOT_VALID"}}``, and ECS's throttling
  (``throttle(n)``: the next ``n`` PUTs) with ``{"error": {"Code": "ThrottlingException"}}``;
- **protection lapses** at its ``ExpirationDate``, however busy the task ("After this time
  period lapses, the protectionEnabled parameter is set to false"): ``GET`` and
  ``protected()`` then say unprotected. A worker that set it once and stayed busy past the
  period is scaled in on AWS; here a test sees it.

The clock is the caller's (wall seconds), so a test can move it by hours.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

from devstack.loopback import LoopbackServer, serve_on_loopback

PATH = "/task-protection/v1/state"
DEFAULT_MINUTES = 120
MIN_MINUTES, MAX_MINUTES = 1, 2880
TASK_ARN = "arn:aws:ecs:us-east-1:000000000000:task/pagefleet-local/0123456789abcdef0"


class EcsAgent:
    """One task's protection state, served on loopback (``start()`` gives its ``ECS_AGENT_URI``)."""

    def __init__(self, clock: Callable[[], float] = time.time, *, in_service: bool = True) -> None:
        self._clock = clock
        self._in_service = in_service
        self._throttled = 0
        self._lock = threading.Lock()
        self._until: float | None = None  # wall seconds; None: not protected
        self.puts: list[dict[str, Any]] = []  # the bodies of accepted PUTs, in order
        self.refused: list[str] = []  # why each refused PUT was refused
        self._server: LoopbackServer | None = None

    # --- the state ------------------------------------------------------------------------
    def protected(self) -> bool:
        return self.expiration() is not None

    def expiration(self) -> float | None:
        """When protection lapses (wall seconds), or None when the task is not protected."""
        with self._lock:
            if self._until is None or self._clock() >= self._until:
                return None
            return self._until

    def throttle(self, puts: int) -> None:
        """ECS throttles the next ``puts`` PUTs (its documented answer: "Rate exceeded")."""
        with self._lock:
            self._throttled = puts

    def put(self, body: Any) -> tuple[int, dict[str, Any]]:
        """A PUT's body as the agent and ECS take it: (status, answer)."""
        problem = _problem(body)
        if problem is not None:
            self.refused.append(problem)
            return 400, {"error": {"Arn": TASK_ARN, "Code": "InvalidParameterException",
                                   "Message": problem}}  # fmt: skip
        if not self._in_service:
            self.refused.append("TASK_NOT_VALID")
            return 400, {"failure": {"Arn": TASK_ARN, "Detail": None, "Reason": "TASK_NOT_VALID"}}
        with self._lock:
            if self._throttled > 0:
                self._throttled -= 1
                self.refused.append("ThrottlingException")
                return 400, {"error": {"Arn": TASK_ARN, "Code": "ThrottlingException",
                                       "Message": "Rate exceeded"}}  # fmt: skip
            if body["ProtectionEnabled"]:
                minutes = body.get("ExpiresInMinutes", DEFAULT_MINUTES)
                self._until = self._clock() + minutes * 60
            else:
                self._until = None
            self.puts.append(dict(body))
        return 200, self.state()

    def state(self) -> dict[str, Any]:
        until = self.expiration()
        stamp = None if until is None else datetime.fromtimestamp(until, UTC).isoformat()
        return {
            "protection": {
                "ExpirationDate": stamp.replace("+00:00", "Z") if stamp else None,
                "ProtectionEnabled": until is not None,
                "TaskArn": TASK_ARN,
            }
        }

    # --- serving --------------------------------------------------------------------------
    def start(self) -> str:
        """Serve on loopback; the URL to give the worker as ``ECS_AGENT_URI``."""
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != PATH:
                    self._answer(404, {"error": {"Code": "ResourceNotFoundException"}})
                    return
                self._answer(200, agent.state())

            def do_PUT(self) -> None:
                if self.path != PATH:
                    self._answer(404, {"error": {"Code": "ResourceNotFoundException"}})
                    return
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = _UNDECODABLE
                self._answer(*agent.put(body))

            def _answer(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = serve_on_loopback(Handler, "ecs-agent")
        return self._server.url

    @property
    def url(self) -> str:
        """Its ``ECS_AGENT_URI``, once started."""
        assert self._server is not None, "the agent is not started"
        return self._server.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


_UNDECODABLE = object()
_FIELDS = {"ProtectionEnabled": bool, "ExpiresInMinutes": int}


def _problem(body: Any) -> str | None:
    """Why the agent (decoding strictly) or ECS would refuse ``body``; None: taken."""
    if body is None:
        return "Invalid request: does not contain 'ProtectionEnabled' field"
    if not isinstance(body, dict) or set(body) - set(_FIELDS):
        return "UpdateTaskProtection: failed to decode request"
    for name, kind in _FIELDS.items():
        value = body.get(name)
        # A bool is an int in Python; the agent's decoder (Go's) takes neither for the other.
        if value is not None and (
            isinstance(value, bool) != (kind is bool) or not isinstance(value, kind)
        ):
            return "UpdateTaskProtection: failed to decode request"
    if body.get("ProtectionEnabled") is None:
        return "Invalid request: does not contain 'ProtectionEnabled' field"
    minutes = body.get("ExpiresInMinutes")
    if (
        body["ProtectionEnabled"]
        and minutes is not None
        and not MIN_MINUTES <= minutes <= MAX_MINUTES
    ):
        return (
            f"expiresInMinutes must be between {MIN_MINUTES} and {MAX_MINUTES} minutes "
            f"(was {minutes})"
        )
    return None
