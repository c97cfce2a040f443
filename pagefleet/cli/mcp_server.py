"""``pagefleet mcp``: a Model Context Protocol server (stdio) for AI agents, over the API.

It is a client of a pagefleet API like any other (its URL and key, the tenant's limits and
isolation): an agent opens a browser session, runs steps of the workflow language one at a
time reading an observation of the page after each (URL, title, ARIA snapshot, a screenshot
link when asked), saves what worked as a named workflow, and runs it as a job without the
model. Tool inputs are the step language's JSON Schema, so the agent's steps are checked as
it writes them; an API refusal comes back as a tool error naming the field, for the model
to correct.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python

from pagefleet.client import ApiError, PagefleetClient
from pagefleet.jobs.submission import submission_schema
from pagefleet.workflow import Step

SERVER_NAME = "pagefleet"
INSTRUCTIONS = (
    "Drive a real browser one step at a time: open_session, then run_step with steps of the "
    "pagefleet workflow language (goto, click, fill, press, select, wait_for, extract, ...), "
    "reading the observation (URL, title, ARIA snapshot) after each. save_as_workflow keeps "
    "the steps that succeeded as a named workflow (name literal values in `inputs` to make "
    "them parameters); submit_job runs it later without you; close_session when done."
)
# The longest a get_job call waits for a job to end before answering with it as it is.
MAX_JOB_WAIT_S = 120


@functools.cache
def step_schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    """(one step's schema, its $defs): the workflow language's steps."""
    schema = TypeAdapter(Step).json_schema(ref_template="#/$defs/{model}")
    defs = schema.pop("$defs", {})
    return schema, defs


def _object(properties: dict[str, Any], required: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
        **extra,
    }


SESSION_ID = {"type": "string", "pattern": "^[0-9a-z]{26}$", "description": "the session's id"}


def tools() -> list[types.Tool]:
    step, defs = step_schemas()
    submission = submission_schema()
    submission_defs = submission.pop("$defs", {})
    for key in ("$schema", "$id", "title"):
        submission.pop(key, None)
    return [
        types.Tool(
            name="open_session",
            description="Open a browser session (one of the tenant's running slots).",
            input_schema=_object(
                {
                    "options": {"type": "object", "description": "a job's options"},
                    "use_session": {"type": "string", "description": "a saved login session"},
                    "idle_timeout_s": {"type": "integer", "minimum": 5, "maximum": 1800},
                    "max_duration_s": {"type": "integer", "minimum": 10, "maximum": 3600},
                },
                [],
            ),
        ),
        types.Tool(
            name="run_step",
            description=(
                "Run one step (`step`) or several in order (`steps`) in the session; answers "
                "whether they ran, what they extracted, and the page after them."
            ),
            input_schema=_object(
                {
                    "session_id": SESSION_ID,
                    "step": step,
                    "steps": {"type": "array", "items": step, "minItems": 1, "maxItems": 20},
                    "screenshot": {"type": "boolean", "default": False},
                },
                ["session_id"],
                **{"$defs": defs},
            ),
        ),
        types.Tool(
            name="observe",
            description="The page as it is now: URL, title, ARIA snapshot, a screenshot if asked.",
            input_schema=_object(
                {"session_id": SESSION_ID, "screenshot": {"type": "boolean", "default": False}},
                ["session_id"],
            ),
        ),
        types.Tool(
            name="close_session",
            description="Close the session (its browser goes; its steps stay savable).",
            input_schema=_object({"session_id": SESSION_ID}, ["session_id"]),
        ),
        types.Tool(
            name="save_as_workflow",
            description=(
                "Save the session's successful steps as the next version of a named workflow; "
                "`inputs` maps an input name to a literal of the steps it replaces."
            ),
            input_schema=_object(
                {
                    "session_id": SESSION_ID,
                    "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"},
                    "inputs": {
                        "type": "object",
                        "additionalProperties": {"type": ["string", "number", "boolean"]},
                    },
                    "description": {"type": "string"},
                },
                ["session_id", "name"],
            ),
        ),
        types.Tool(
            name="submit_job",
            description="Submit a job: inline `steps`, or a named `workflow` with `inputs`.",
            input_schema={**submission, "$defs": submission_defs},
        ),
        types.Tool(
            name="get_job",
            description="A job, its result and its artifacts' links (waits up to wait_s to end).",
            input_schema=_object(
                {
                    "job_id": {"type": "string", "pattern": "^[0-9a-z]{26}$"},
                    "wait_s": {"type": "integer", "minimum": 0, "maximum": MAX_JOB_WAIT_S},
                },
                ["job_id"],
            ),
        ),
    ]


def _dump(value: Any) -> Any:
    """An answer as JSON values (models inside lists and dicts too)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    return to_jsonable_python(value, exclude_none=True)


class AgentTools:
    """What each tool does, through the API client."""

    def __init__(self, client: PagefleetClient) -> None:
        self.client = client
        self._calls: dict[str, Callable[[dict[str, Any]], Any]] = {
            "open_session": self.open_session,
            "run_step": self.run_step,
            "observe": self.observe,
            "close_session": lambda a: self.client.close_session(a["session_id"]),
            "save_as_workflow": lambda a: self.client.save_session(
                a["session_id"], a["name"], a.get("inputs"), a.get("description")
            ),
            "submit_job": lambda a: self.client.submit(a),
            "get_job": self.get_job,
        }

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's answer as JSON; KeyError for a tool that does not exist."""
        return dict(_dump(self._calls[name](arguments)))

    def open_session(self, a: dict[str, Any]) -> Any:
        return self.client.open_session(
            options=a.get("options"),
            use_session=a.get("use_session"),
            idle_timeout_s=a.get("idle_timeout_s"),
            max_duration_s=a.get("max_duration_s"),
        )

    def run_step(self, a: dict[str, Any]) -> Any:
        given = a.get("step") if a.get("step") is not None else a.get("steps")
        if given is None:
            raise ApiError(422, "validation_error", "give `step` or `steps`", field="step")
        return self._steps(a["session_id"], given, screenshot=bool(a.get("screenshot")))

    def observe(self, a: dict[str, Any]) -> Any:
        return self._steps(a["session_id"], [], screenshot=bool(a.get("screenshot")))

    def _steps(self, session_id: str, steps: Any, *, screenshot: bool) -> Any:
        # The path that holds nothing: the call answers 202 at once (wait_s=0) and the
        # command is read until its answer, so no API execution waits for a browser.
        return self.client.session_steps(session_id, steps, screenshot=screenshot, wait_s=0)

    def get_job(self, a: dict[str, Any]) -> dict[str, Any]:
        wait = min(int(a.get("wait_s") or 0), MAX_JOB_WAIT_S)
        job = self.client.get(a["job_id"])
        if wait and not job.status.is_final:
            try:
                job = self.client.wait(a["job_id"], timeout=wait)
            except TimeoutError:
                job = self.client.get(a["job_id"])
        out: dict[str, Any] = _dump(job)
        out["result"] = self.client.result(job) if job.status.is_final else None
        if job.status.is_final:
            out["artifact_links"] = _dump(self.client.artifacts(job.job_id))
        return out


def build_server(client: PagefleetClient) -> Server[Any]:
    agent = AgentTools(client)
    listed = tools()

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        try:
            answer = await anyio.to_thread.run_sync(agent.call, params.name, arguments)
        except KeyError:
            return _error(f"no tool {params.name!r}")
        except ApiError as exc:
            details = {"status": exc.status, "code": exc.code, "field": exc.field}
            return _error(str(exc), {**details, "details": exc.details})
        text = json.dumps(answer, separators=(",", ":"))
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=answer
        )

    return Server(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _error(message: str, details: dict[str, Any] | None = None) -> types.CallToolResult:
    body = {"error": message, **(details or {})}
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(body))], structured_content=body, is_error=True
    )


async def serve_stdio(client: PagefleetClient) -> None:
    server = build_server(client)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
