"""What each tool does, through the API client, and what an agent is told when it cannot.

Every call is checked against its tool's arguments model before anything is sent: an
unknown tool, a missing or unknown argument, a wrong value each come back as a
``ToolRefusal`` naming the argument and saying what to do next, as does every refusal of
the API (a 404 session, a full slot, a bad key).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from pagefleet.agents.catalogue import (
    BY_NAME,
    IMAGE_MAX_BYTES,
    MAX_JOB_WAIT_S,
    TEXT_INLINE_MAX_BYTES,
    TOOLS,
)
from pagefleet.browsing.models import MAX_DEADLINE_S
from pagefleet.client import ApiError, PagefleetClient
from pagefleet.client.browsing import DEFAULT_GIVE_UP_S, CommandPending
from pagefleet.errors import field_path
from pagefleet.ids import new_ulid

IMAGE_TIMEOUT_S = 30
# await_human is read this long past its timeout_s (the worker notices within a second or
# two; the command may wait for the session's steps before it).
HUMAN_MARGIN_S = 60
# Files get_file answers as text (besides text/*).
_TEXT_KINDS = {"application/json", "application/xml", "application/javascript", "text/csv"}


@dataclass  # not frozen: raising sets an exception's __traceback__ and __cause__
class ToolRefusal(Exception):
    """A call that did not happen, or that the API refused: what, where, and what next."""

    message: str
    next: str
    field: str | None = None
    status: int | None = None
    code: str | None = None
    details: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def body(self) -> dict[str, Any]:
        out = {
            "error": self.message,
            "next": self.next,
            "field": self.field,
            "status": self.status,
            "code": self.code,
            "details": self.details or None,
        }
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class Screenshot:
    """A screenshot's bytes, for the server to return as image content the model sees."""

    data: bytes
    mime_type: str = "image/png"


@dataclass(frozen=True)
class ToolAnswer:
    body: dict[str, Any]
    failed: bool = False  # a step that ran and failed: an error result the model reads
    screenshot: Screenshot | None = None


def _dump(value: Any) -> Any:
    """An answer as JSON values (models inside lists and dicts too)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    return to_jsonable_python(value, exclude_none=True)


def checked(tool: str, arguments: Mapping[str, Any]) -> BaseModel:
    """The arguments as the tool's model, or the refusal naming the first wrong one."""
    spec = BY_NAME.get(tool)
    if spec is None:
        names = ", ".join(t.name for t in TOOLS)
        raise ToolRefusal(f"no tool {tool!r}", next=f"call one of: {names}", code="no_tool")
    try:
        return spec.arguments.model_validate(dict(arguments))
    except ValidationError as exc:
        raise _refusal(tool, spec.arguments, exc) from None


def _refusal(tool: str, model: type[BaseModel], exc: ValidationError) -> ToolRefusal:
    takes = ", ".join(model.model_fields)
    details = []
    for error in exc.errors():
        loc = error.get("loc", ())
        reason = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden" and len(loc) == 1:
            reason = f"unknown argument: {tool} takes {takes}"
        elif error["type"] == "missing" and len(loc) == 1:
            reason = "required argument missing"
        details.append({"field": field_path(loc) if loc else "arguments", "reason": reason})
    first = details[0]
    return ToolRefusal(
        f"{first['field']}: {first['reason']}",
        next=f"fix `{first['field']}` and call {tool} again (its input schema lists the fields)",
        field=first["field"],
        status=422,
        code="invalid_argument",
        details=details,
    )


def _api_refusal(exc: ApiError, tool: str, arguments: Mapping[str, Any]) -> ToolRefusal:
    """The API's refusal with what the agent can do about it."""
    what = "session" if "session_id" in arguments else "job"
    if exc.status == 404:
        next_step = (
            f"no such {what} for this key: check the id, or open_session for a new session"
            if what == "session"
            else "no such job for this key: check job_id (submit_job answers it)"
        )
    elif exc.status == 409:
        next_step = (
            "the session has ended or is busy: open_session for a new one "
            "(save_as_workflow still keeps its steps)"
            if what == "session"
            else "the job is not in a state that allows this: get_job shows its status"
        )
    elif exc.status == 429:
        wait = f" after {exc.retry_after:g} s" if exc.retry_after else " in a while"
        next_step = f"a limit was reached: close_session what you no longer use, or retry{wait}"
    elif exc.status in (401, 403):
        next_step = "the API key was refused: the key (PAGEFLEET_API_KEY) must be a valid one"
    elif exc.status in (400, 413, 422):
        where = f"`{exc.field}`" if exc.field else "the arguments"
        next_step = f"fix {where} and call {tool} again"
    else:
        next_step = f"the service failed: call {tool} again in a few seconds"
    return ToolRefusal(
        exc.message,
        next=next_step,
        field=exc.field,
        status=exc.status,
        code=exc.code,
        details=exc.details,
    )


class AgentTools:
    """Each tool's work, given checked arguments, through the API client."""

    def __init__(self, client: PagefleetClient, *, wait_s: int | None = None) -> None:
        self.client = client
        self._wait_s = wait_s  # the longest a call waits (None: each tool's own bound)
        # The sessions opened through these tools and not closed through them: closed when
        # the agent's connection ends (close_opened), never left open and billing.
        self.opened: set[str] = set()
        self._calls: dict[str, Callable[[Any, dict[str, Any]], ToolAnswer]] = {
            "open_session": self.open_session,
            "run_step": self.run_step,
            "observe": self.observe,
            "upload_file": self.upload_file,
            "get_file": self.get_file,
            "await_human": self.await_human,
            "close_session": self.close_session,
            "list_sessions": lambda a, _: ToolAnswer(
                {"sessions": _dump(self.client.open_sessions(a.status))}
            ),
            "save_as_workflow": lambda a, _: self._plain(
                self.client.save_as_workflow(a.session_id, a.name, a.inputs, a.description)
            ),
            "submit_job": lambda _, raw: self._plain(self.client.submit(raw)),
            "get_job": self.get_job,
        }

    def call(self, tool: str, arguments: Mapping[str, Any]) -> ToolAnswer:
        """The tool's answer; ``ToolRefusal`` when it cannot be made."""
        args = checked(tool, arguments)
        raw = dict(arguments)
        try:
            return self._calls[tool](args, raw)
        except ApiError as exc:
            raise _api_refusal(exc, tool, raw) from None
        except httpx.TransportError as exc:
            raise ToolRefusal(
                f"the API did not answer: {exc}",
                next=f"call {tool} again; if it keeps failing, PAGEFLEET_API_URL is wrong",
                code="unreachable",
            ) from None

    @staticmethod
    def _plain(value: Any) -> ToolAnswer:
        return ToolAnswer(dict(_dump(value)))

    def open_session(self, a: Any, raw: dict[str, Any]) -> ToolAnswer:
        view = self.client.open_session(
            options=raw.get("options"),
            use_session=a.use_session,
            idle_timeout_s=a.idle_timeout_s,
            max_duration_s=a.max_duration_s,
        )
        self.opened.add(view.session_id)
        return self._plain(view)

    def close_session(self, a: Any, raw: dict[str, Any]) -> ToolAnswer:
        closed = self._plain(self.client.close_session(a.session_id))
        self.opened.discard(a.session_id)
        return closed

    def close_opened(self) -> list[str]:
        """Close every session these tools opened and did not close (the agent went away):
        what was closed. A failure is left to the session's idle timeout."""
        closed = []
        for session_id in sorted(self.opened):
            with contextlib.suppress(ApiError, httpx.HTTPError):
                self.client.close_session(session_id)
                closed.append(session_id)
        self.opened.clear()
        return closed

    def run_step(self, a: Any, raw: dict[str, Any]) -> ToolAnswer:
        # The raw steps go on: the API parses them as it stores them ({{inputs.x}} and all).
        given = raw["step"] if a.step is not None else raw["steps"]
        return self._observed(_dump(self._steps(a.session_id, given, a.screenshot, a.aria())))

    def upload_file(self, a: Any, raw: dict[str, Any]) -> ToolAnswer:
        if a.encoding == "base64":
            try:
                base64.b64decode(a.content, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ToolRefusal(
                    f"content: not valid base64 ({exc})",
                    next="give the file's bytes as base64, or encoding text for a text file",
                    field="content",
                    status=422,
                    code="invalid_argument",
                ) from None
        return self._observed(_dump(self._steps(a.session_id, a.step(), False, True)))

    def get_file(self, a: Any, raw: dict[str, Any]) -> ToolAnswer:
        files = self.client.session_files(a.session_id)
        if a.name is None:
            return ToolAnswer({"files": _dump(files)})
        found = next((f for f in reversed(files) if f.name == a.name), None)
        if found is None:
            made = ", ".join(f.name for f in files) or "none yet"
            raise ToolRefusal(
                f"name: the session made no file {a.name!r} (it made: {made})",
                next="call get_file with one of those names; a download or a screenshot "
                "step with `name` makes one",
                field="name",
                status=404,
                code="not_found",
            )
        body: dict[str, Any] = _dump(found)
        kind = found.content_type.split(";")[0].strip()
        textual = kind.startswith("text/") or kind in _TEXT_KINDS
        image = kind.startswith("image/") and found.bytes <= IMAGE_MAX_BYTES
        if not (image or (textual and found.bytes <= TEXT_INLINE_MAX_BYTES)):
            return ToolAnswer(body)
        data = self.client.download(found.url)
        if image:
            return ToolAnswer(body, screenshot=Screenshot(data, kind))
        body["content"] = data.decode("utf-8", errors="replace")
        return ToolAnswer(body)

    def await_human(self, a: Any, raw: dict[str, Any]) -> ToolAnswer:
        # Read as long as the person may take. Remote, a call may wait 20 s only: it answers
        # that the person has not continued yet, with the command to wait on, and a call
        # with that command_id is the same ask (the API answers a sent-again command from
        # the first), so the person is asked once however often the agent looks.
        command_id = a.command_id or new_ulid()
        try:
            waited = self._steps(
                a.session_id,
                a.step(),
                False,
                True,
                give_up_s=a.timeout_s + HUMAN_MARGIN_S,
                command_id=command_id,
            )
        except CommandPending as pending:
            if pending.view.state == "lost":
                raise _lost(a.session_id) from None
            return ToolAnswer(
                {
                    "state": "waiting_for_human",
                    "session_id": a.session_id,
                    "command_id": command_id,
                    "prompt": a.prompt,
                    "next": "nobody has continued it yet: call await_human again with the "
                    f"same arguments and command_id {command_id!r} to wait on (the person "
                    "is not asked again); they continue it in the console or with POST "
                    f"/v1/jobs/{a.session_id}/continue",
                }
            )
        return self._observed(_dump(waited))

    def observe(self, a: Any, raw: dict[str, Any]) -> ToolAnswer:
        return self._observed(_dump(self._steps(a.session_id, [], a.screenshot, a.aria())))

    def _steps(
        self,
        session_id: str,
        steps: Any,
        screenshot: bool,
        aria: Any,
        *,
        give_up_s: float = DEFAULT_GIVE_UP_S,
        command_id: str | None = None,
    ) -> Any:
        """The command's answer; ``command_id`` given: ``CommandPending`` is the caller's."""
        # The path that holds nothing: the call answers 202 at once (wait_s=0) and the
        # command is read until its answer, so no API execution waits for a browser.
        # An observation only looks: it may wait its turn behind long steps (an
        # await_human) instead of expiring after the default deadline.
        deadline = MAX_DEADLINE_S if steps == [] else None
        # Remote: no longer than the API's request may last.
        give_up = give_up_s if self._wait_s is None else self._wait_s
        try:
            return self.client.session_steps(
                session_id,
                steps,
                screenshot=screenshot,
                aria=aria,
                wait_s=0,
                deadline_s=deadline,
                give_up_s=give_up,
                command_id=command_id,
            )
        except CommandPending:
            if command_id is not None:
                raise
            raise ToolRefusal(
                f"the steps are still running after {give_up:g} s",
                next="call observe in a few seconds: it answers once they are done",
                code="still_running",
            ) from None

    def _observed(self, body: dict[str, Any]) -> ToolAnswer:
        link = (body.get("observation") or {}).get("screenshot_url")
        image = self._image(link) if link else None
        if link and image is None:
            body["screenshot_note"] = "the image could not be read: screenshot_url links it"
        failed = not body.get("ok", True)
        if failed:
            at = body.get("ran", 0)
            body["next"] = (
                f"step {at} of this call failed (the ones before it ran): read `error` and "
                "the observation, fix that step, and run it again"
            )
        return ToolAnswer(body, failed=failed, screenshot=image)

    @staticmethod
    def _image(link: str) -> Screenshot | None:
        """The screenshot behind its presigned link (the store's, not the API's: no key)."""
        try:
            response = httpx.get(link, timeout=IMAGE_TIMEOUT_S)
            response.raise_for_status()
        except httpx.HTTPError:
            return None
        kind = response.headers.get("content-type", "image/png").split(";")[0]
        return Screenshot(response.content, kind if kind.startswith("image/") else "image/png")

    def get_job(self, a: Any, raw: dict[str, Any]) -> ToolAnswer:
        wait = min(a.wait_s, MAX_JOB_WAIT_S, self._wait_s or MAX_JOB_WAIT_S)
        job = self.client.get(a.job_id)
        if wait and not job.status.is_final:
            try:
                job = self.client.wait(a.job_id, timeout=wait)
            except TimeoutError:
                job = self.client.get(a.job_id)
        out: dict[str, Any] = _dump(job)
        out["result"] = self.client.result(job) if job.status.is_final else None
        if job.status.is_final:
            out["artifact_links"] = _dump(self.client.artifacts(job.job_id))
        else:
            out["next"] = "the job has not ended: call get_job again with wait_s"
        return ToolAnswer(out)


def _lost(session_id: str) -> ToolRefusal:
    return ToolRefusal(
        "the session's browser went while it waited for the person (its worker stopped)",
        next=f"call list_sessions or observe {session_id}: open a new session if it is gone",
        code="lost",
    )
