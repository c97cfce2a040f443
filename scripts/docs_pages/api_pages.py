"""The routes and the error reference: from the OpenAPI document, the API's error map, the
gateway's responses, and the job error catalogue checked against the code that raises it."""

from __future__ import annotations

import ast
import inspect
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from docs_pages.table import code, table

REPO_ROOT = Path(__file__).resolve().parents[2]
OPENAPI = REPO_ROOT / "docs" / "openapi.json"
METHODS = ("get", "post", "put", "patch", "delete")

# The answers the API function writes itself (functions/api/), not through a domain error.
OWN_ANSWERS = {
    "invalid_json": "the body is not JSON: send a JSON object",
    "route_not_found": "no such route (or no such method on it): check the routes table",
    "method_not_allowed": "a GET of the remote MCP endpoint: it is stateless, POST each "
    "JSON-RPC message",
    "internal_error": "a fault of ours: quote the request id in the message when you report it",
    "service_unavailable": "a backing AWS service was briefly unavailable: retry the same "
    "request (with its Idempotency-Key)",
}


def routes() -> str:
    document = json.loads(OPENAPI.read_text())
    stage = document["servers"][0]["url"]
    rows = []
    for path, operations in document["paths"].items():
        for method in METHODS:
            op = operations.get(method)
            if op is None:
                continue
            statuses = sorted(op["responses"])
            ok = [s for s in statuses if s.startswith("2")]
            errors = [s for s in statuses if not s.startswith("2")]
            keyed = "no" if op.get("security") == [] else "yes"
            tag = (op.get("tags") or [""])[0]
            rows.append(
                (
                    code(f"{method.upper()} {stage}{path}"),
                    op.get("summary", ""),
                    tag,
                    ", ".join(ok),
                    ", ".join(errors),
                    keyed,
                )
            )
    intro = (
        "# Routes\n\nEvery route of the API, from its OpenAPI document "
        "([openapi.json](../openapi.json), also `GET /v1/openapi.json`). Every answer's "
        "shape is in that document; [errors](errors.md) says what each error means. "
        "Requests carry `Authorization: Bearer <API key>` unless the last column says no.\n\n"
    )
    headers = ("route", "what it does", "area", "success", "errors", "key")
    return intro + table(headers, rows)


def _doc(cls: type) -> str:
    text = inspect.getdoc(cls) or ""
    if not text or cls.__doc__ is None:
        raise ValueError(f"{cls.__name__} has no docstring: the error reference needs one")
    return " ".join(text.split())


def _api_errors() -> list[tuple[int, str, str, str]]:
    from functions.api.errors import STATUS_BY_ERROR, status_of
    from pagefleet import errors as domain

    classes = [
        c
        for c in vars(domain).values()
        if isinstance(c, type)
        and issubclass(c, domain.PagefleetError)
        and any(issubclass(c, mapped) for mapped in STATUS_BY_ERROR)
    ]
    return sorted((status_of(c("x")), c.code, c.__name__, _doc(c)) for c in classes)


def own_answers() -> dict[str, int]:
    """``error_response(<status>, "<code>", ...)`` calls in functions/api/: code -> status."""
    found: dict[str, int] = {}
    for source in sorted((REPO_ROOT / "functions" / "api").rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            status, error_code = node.args[0], node.args[1]
            if (
                name in ("error_response", "proxy_error")
                and isinstance(status, ast.Constant)
                and isinstance(error_code, ast.Constant)
            ):
                found[str(error_code.value)] = int(str(status.value))
    return found


# The classes that end an attempt, and what each does with the job (browser_task/errors.py).
_FAILS = {"FailJob": "no", "RetryJob": "yes", "RotateBrowser": "yes, on a fresh browser"}


def raised_kinds() -> dict[str, set[str]]:
    """Every error kind the code ends an attempt with, and whether each is retried."""
    found: dict[str, set[str]] = defaultdict(set)
    trees = [
        ast.parse(source.read_text())
        for package in ("pagefleet", "browser_task", "functions")
        for source in sorted((REPO_ROOT / package).rglob("*.py"))
    ]
    named = _string_constants(trees)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                _class_kind(node, found)
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            words = {k.arg: k.value for k in node.keywords}
            kind = words.get("kind")
            if isinstance(kind, ast.Name) and kind.id in named:
                kind = ast.Constant(named[kind.id])  # kind=COST_CAP_KIND
            if not isinstance(kind, ast.Constant):
                continue
            if name in _FAILS:
                found[str(kind.value)].add(_FAILS[name])
            elif name == "JobError":
                flag = words.get("retryable")
                retried = isinstance(flag, ast.Constant) and flag.value is True
                found[str(kind.value)].add("yes" if retried else "no")
    return dict(found)


def _string_constants(trees: list[ast.Module]) -> dict[str, str]:
    """Module-level ``NAME = "text"`` of every module, for a kind given by its constant's
    name; a name two modules give different texts is left out (it cannot be read)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for tree in trees:
        for statement in tree.body:
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
                for target in statement.targets:
                    if isinstance(target, ast.Name) and isinstance(statement.value.value, str):
                        seen[target.id].add(statement.value.value)
    return {name: next(iter(texts)) for name, texts in seen.items() if len(texts) == 1}


def _class_kind(node: ast.ClassDef, found: dict[str, set[str]]) -> None:
    """``default_kind = "..."`` of a failure class: retried as its base says, unless the
    class sets ``self.retryable`` from what the job asked for."""
    bases = [getattr(b, "id", "") for b in node.bases]
    chosen = any(
        isinstance(n, ast.Attribute) and n.attr == "retryable" and isinstance(n.ctx, ast.Store)
        for n in ast.walk(node)
    )
    for statement in node.body:
        if (
            isinstance(statement, ast.Assign)
            and any(getattr(t, "id", None) == "default_kind" for t in statement.targets)
            and isinstance(statement.value, ast.Constant)
        ):
            base = next((b for b in (node.name, *bases) if b in _FAILS), "JobFailure")
            label = _FAILS.get(base, "no")
            kind = str(statement.value.value)
            found[kind].add(f"{label}, unless the job asks" if chosen else label)


def _retried(kind: str, found: set[str]) -> str:
    from pagefleet.jobs.states import JobStatus

    ends = {s.value for s in JobStatus} | {"compensated"}
    if kind in ends or kind == "timeout":
        state = {"timeout": "timed_out", "compensated": "failed"}.get(kind, kind)
        return f"no: the job ends `{state}`"
    return " or ".join(sorted(found))


def errors() -> str:
    from pagefleet.jobs.error_kinds import ERROR_KINDS
    from pagefleet.specs.gateway import GATEWAY_RESPONSES

    own = own_answers()
    unknown = sorted(set(own) - set(OWN_ANSWERS))
    if unknown:
        raise ValueError(f"functions/api answers {unknown}: describe them in OWN_ANSWERS")
    api_rows: list[tuple[Any, ...]] = [
        (status, code(error_code), name, text) for status, error_code, name, text in _api_errors()
    ]
    api_rows += [
        (status, code(error_code), "", OWN_ANSWERS[error_code])
        for error_code, status in sorted(own.items(), key=lambda kv: (kv[1], kv[0]))
    ]
    api_rows.sort(key=lambda row: (row[0], row[1]))
    gateway_rows = [
        (r.status or ("4xx" if r.type == "DEFAULT_4XX" else "5xx"), code(r.code), r.type, r.when)
        for r in GATEWAY_RESPONSES
    ]
    kinds = raised_kinds()
    catalogue = {k.kind: k for k in ERROR_KINDS}
    missing, gone = sorted(set(kinds) - set(catalogue)), sorted(set(catalogue) - set(kinds))
    if missing or gone:
        raise ValueError(
            f"pagefleet/jobs/error_kinds.py is out of step with the code: not listed {missing}, "
            f"no longer raised {gone}"
        )
    kind_rows = [
        (code(k.kind), _retried(k.kind, kinds[k.kind]), k.when, k.todo) for k in ERROR_KINDS
    ]
    return (
        "# Errors\n\n"
        'Every error the API answers is `{"error": {"code", "message", "field"?, '
        '"details"?}}`: `code` is stable, `message` is for people, `field` names the part '
        "of the request at fault (`steps[2].selector`), `details` lists every problem.\n\n"
        "## Answers of the API\n\n"
        + table(("HTTP", "error.code", "error", "when, and what to do"), api_rows)
        + "\n## Answers of API Gateway itself\n\n"
        "Before the API function runs, API Gateway may refuse a request itself; its gateway "
        "responses give those answers the same shape.\n\n"
        + table(("HTTP", "error.code", "gateway response", "when"), gateway_rows)
        + "\n## How a job ends: `error.kind`\n\n"
        "A failed attempt records `error.kind`, `error.message`, the step and the timeout "
        "that fired. **The rule:** a kind marked retried schedules another attempt after "
        "exponential backoff with full jitter while the job's `max_attempts` allows (its "
        "`retry` policy); otherwise the job ends `failed` at once, except where the kind "
        "names its own end (`cancelled`, `expired`, `timed_out`, `dead_lettered`, "
        "`needs_review`). Where the column says both, the message tells which case it was "
        "(a network error is retried, a refused address is not).\n\n"
        + table(("error.kind", "retried", "when", "what to do"), kind_rows)
    )
