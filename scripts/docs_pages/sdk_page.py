"""The SDK reference: every public method of ``PagefleetClient``, the routes it calls (read
from the client's code) and examples of the common calls."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from itertools import product
from typing import Any

from docs_pages.table import code, table

CLIENT_MODULES = "pagefleet.client"

# The calls most programs make, by family, each shown at work. tests/e2e/test_readme.py runs
# every one as printed against the local stack (its API, key and demo site filled in).
SDK_EXAMPLES: dict[str, str] = {
    "Submit a job and wait for it": """\
from pagefleet.client import ApiError, PagefleetClient

with PagefleetClient("http://127.0.0.1:8080", "pf_...") as client:
    job = client.submit(
        {
            "steps": [
                {"action": "goto", "url": "http://127.0.0.1:8081/"},
                {"action": "screenshot", "name": "home.png"},
            ]
        },
        idempotency_key="home-1",
    )
    job = client.wait(job.job_id, timeout=120)  # polls until it ends
    print(job.status, job.result)
    for artifact in client.artifacts(job.job_id):  # presigned links with their sha256
        data = client.download_verified(artifact)  # raises ChecksumMismatch if it differs
    try:
        client.cancel(job.job_id)
    except ApiError as refused:  # a job that has ended cannot be cancelled
        print(refused.status, refused.code)  # 409 and the error's code
""",
    "Follow a job as it runs": """\
from pagefleet.client import PagefleetClient
from pagefleet.client.follow import StatusUpdate

with PagefleetClient("http://127.0.0.1:8080", "pf_...") as client:
    job = client.submit({"steps": [{"action": "goto", "url": "http://127.0.0.1:8081/"}]})
    # The WebSocket when the stack has one, polling otherwise; the last item is the final
    # StatusUpdate. In asyncio: `async for item in client.follow_async(job.job_id)`.
    for item in client.follow(job.job_id, timeout=120):
        if isinstance(item, StatusUpdate):
            print("status", item.status, "final" if item.final else "")
        else:
            print("event", item.seq, item.type, item.action or "")
""",
    "Submit a batch": """\
from pagefleet.client import PagefleetClient

with PagefleetClient("http://127.0.0.1:8080", "pf_...") as client:
    pages = ["http://127.0.0.1:8081/", "http://127.0.0.1:8081/about.html"]
    batch = client.submit_batch(
        [{"steps": [{"action": "goto", "url": url}]} for url in pages],
        idempotency_keys=[f"page-{i}" for i in range(len(pages))],
    )
    print(batch.accepted, "accepted")
    for item in batch.results:  # each answered on its own: 202, or its own 4xx
        print(item.index, item.status, item.job_id or item.error)
""",
    "Named workflows": """\
from pagefleet.client import PagefleetClient

with PagefleetClient("http://127.0.0.1:8080", "pf_...") as client:
    steps = [
        {"action": "goto", "url": "{{inputs.site}}/"},
        {"action": "extract", "name": "title", "selector": "h1"},
    ]
    inputs = {"site": "http://127.0.0.1:8081"}  # defaults; a job may give others
    first = client.put_workflow("titles", {"steps": steps, "inputs": inputs})
    second = client.put_workflow("titles", {"steps": steps[:1], "inputs": inputs})
    print(client.workflow("titles").version)  # the latest: second.version
    print(client.workflow_diff("titles", first.version, second.version).diff)
    job = client.submit({"workflow": f"titles@{first.version}"})  # or "titles": the latest
    print(client.wait(job.job_id, timeout=120).result)
""",
    "Schedules": """\
from pagefleet.client import PagefleetClient

with PagefleetClient("http://127.0.0.1:8080", "pf_...") as client:
    schedule = client.create_schedule(
        {
            "name": "nightly-home",
            "expression": "cron(0 3 * * ? *)",
            "timezone": "Europe/Paris",
            "job": {"steps": [{"action": "goto", "url": "http://127.0.0.1:8081/"}]},
        }
    )
    print(schedule.next_fire_times)
    run = client.run_schedule(schedule.schedule_id)  # one run now (its job, queued)
    client.update_schedule(schedule.schedule_id, enabled=False)  # paused
    print(run.job_id)
    for made in client.schedule_runs(schedule.schedule_id).jobs:  # newest first
        print(made.job_id, made.status)
    client.delete_schedule(schedule.schedule_id)  # its jobs stay
""",
    "A browser session, step by step": """\
from pagefleet.client import PagefleetClient

with PagefleetClient("http://127.0.0.1:8080", "pf_...") as client:
    session = client.open_session(idle_timeout_s=120)
    sid = session.session_id
    page = "http://127.0.0.1:8081/contact.html"
    went = client.session_steps(sid, {"action": "goto", "url": page})
    print(went.ok, went.observation.url)  # and the page's ARIA snapshot
    filled = client.session_steps(
        sid,
        [
            {"action": "fill", "selector": "#name", "value": "Ada"},
            {"action": "fill", "selector": "#email", "value": "ada@example.com"},
        ],
    )
    print(filled.ok, filled.ran)
    saved = client.save_as_workflow(sid, "contact-form")  # its good steps, as a workflow
    print(saved.name, saved.version)
    client.close_session(sid)
""",
}


def _source_tree(function: Callable[..., Any]) -> ast.FunctionDef | ast.AsyncFunctionDef:
    node = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    return node


def _templates(node: ast.expr, local: dict[str, set[str]]) -> set[str]:
    """The path templates an expression can be (``{...}`` where a value goes)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Name) and node.id in local:
        return local[node.id]
    if isinstance(node, ast.JoinedStr):
        parts = [_part(value, local) for value in node.values]
        return {"".join(p) for p in product(*parts)}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return {a + b for a in _templates(node.left, local) for b in _templates(node.right, local)}
    if isinstance(node, ast.IfExp):
        return _templates(node.body, local) | _templates(node.orelse, local)
    raise ValueError(f"cannot read a route from {ast.unparse(node)!r}")


def _part(value: ast.expr, local: dict[str, set[str]]) -> set[str]:
    """One piece of an f-string: its text, a path held in a local, or ``{value}``."""
    if not isinstance(value, ast.FormattedValue):
        return _templates(value, local)
    if isinstance(value.value, ast.Name) and value.value.id in local:
        return local[value.value.id]
    return {"{" + ast.unparse(value.value) + "}"}


def _local_paths(tree: ast.AST) -> dict[str, set[str]]:
    local: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    local[target.id] = _templates(node.value, local)
                except ValueError:
                    continue
    return local


def _resolve(function: Callable[..., Any], tree: ast.AST, name: str) -> Any:
    """What a bare name means in ``function``: an import inside it, or its module's global."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return getattr(importlib.import_module(node.module), alias.name)
    return function.__globals__.get(name)


def _ours(value: Any) -> bool:
    return getattr(value, "__module__", "").startswith(CLIENT_MODULES)


def _calls(
    function: Callable[..., Any], clients: frozenset[str], seen: set[str]
) -> Iterator[tuple[str, str]]:
    """(METHOD, path template) of every API request ``function`` makes, directly or through
    the client's other methods and the client package's helpers it calls. ``clients``: the
    names the client goes by in it."""
    key = f"{function.__module__}.{function.__qualname__}"
    if key in seen:
        return
    seen.add(key)
    try:
        tree = _source_tree(function)
    except OSError:  # made at run time (a dataclass's __init__): no code of ours to read
        return
    local = _local_paths(tree)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):  # in reading order
        yield from _requests_of(node, _Scope(function, tree, local, clients), seen)


@dataclass(frozen=True)
class _Scope:
    """Where a call is read: its function, that function's tree and local paths, and the
    names the client goes by there."""

    function: Callable[..., Any]
    tree: ast.AST
    local: dict[str, set[str]]
    clients: frozenset[str]


def _requests_of(node: ast.Call, scope: _Scope, seen: set[str]) -> Iterator[tuple[str, str]]:
    from pagefleet.client import PagefleetClient

    target = node.func
    if isinstance(target, ast.Attribute) and target.attr == "_request":
        method = node.args[0]
        assert isinstance(method, ast.Constant)
        yield from ((str(method.value), t) for t in sorted(_templates(node.args[1], scope.local)))
    elif isinstance(target, ast.Attribute) and target.attr == "_get":
        yield from (("GET", t) for t in sorted(_templates(node.args[0], scope.local)))
    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        owner = target.value.id
        if owner in scope.clients and hasattr(PagefleetClient, target.attr):
            yield from _calls(getattr(PagefleetClient, target.attr), scope.clients, seen)
        elif _ours(base := _resolve(scope.function, scope.tree, owner)) and inspect.isclass(base):
            yield from _calls(getattr(base, target.attr), scope.clients, seen)  # Base.m(self)
    elif isinstance(target, ast.Name):
        called = _resolve(scope.function, scope.tree, target.id)
        if not _ours(called):
            return
        if inspect.isclass(called):  # a helper object: what its methods request
            members = [m for _, m in inspect.getmembers(called, inspect.isfunction)]
            for member in sorted(members, key=lambda m: m.__code__.co_firstlineno):
                if _ours(member):
                    yield from _calls(member, frozenset({"self"}), seen)
            return
        params = list(inspect.signature(called).parameters)
        passed = frozenset(
            params[i]
            for i, arg in enumerate(node.args)
            if isinstance(arg, ast.Name) and arg.id in scope.clients and i < len(params)
        )
        yield from _calls(called, passed, seen)


@cache
def _operations() -> dict[tuple[str, str], tuple[str, str]]:
    """(METHOD, path with ``{}`` for each value) -> (the document's path, its summary)."""
    from docs_pages.api_pages import OPENAPI

    document = json.loads(OPENAPI.read_text())
    stage = document["servers"][0]["url"]
    return {
        (method.upper(), re.sub(r"\{[^}]+\}", "{}", stage + path)): (
            stage + path,
            op.get("summary", ""),
        )
        for path, operations in document["paths"].items()
        for method, op in operations.items()
    }


def client_routes(name: str) -> list[tuple[str, str]]:
    """The routes ``PagefleetClient.<name>`` calls, as the OpenAPI document names them, in the
    order the code has them. A route the document lacks is an error."""
    from pagefleet.client import PagefleetClient

    routes: list[tuple[str, str]] = []
    for method, template in _calls(getattr(PagefleetClient, name), frozenset({"self"}), set()):
        found = _operations().get((method, re.sub(r"\{[^}]+\}", "{}", template)))
        if found is None:
            raise ValueError(f"PagefleetClient.{name} calls {method} {template}: not in the API")
        if (method, found[0]) not in routes:
            routes.append((method, found[0]))
    return routes


def _signature(member: Any) -> str:
    text = str(inspect.signature(member))
    text = re.sub(r"^\(self(: '[^']*')?(, )?", "(", text).replace("'", "")
    return text


def public_methods() -> list[tuple[str, Callable[..., Any]]]:
    from pagefleet.client import PagefleetClient

    return [
        (name, member)
        for name, member in inspect.getmembers(PagefleetClient, inspect.isfunction)
        if not name.startswith("_")
    ]


def sdk() -> str:
    from pagefleet import client as sdk_module

    rows = []
    for name, member in public_methods():
        doc = " ".join((inspect.getdoc(member) or "").split("\n\n")[0].split())
        routes = client_routes(name)
        if not doc and routes:
            doc = _operations()[(routes[0][0], re.sub(r"\{[^}]+\}", "{}", routes[0][1]))][1]
        if not doc:
            raise ValueError(f"PagefleetClient.{name} needs a docstring for the SDK reference")
        route = ", ".join(code(f"{m} {p}") for m, p in routes)
        rows.append((code(f"{name}{_signature(member)}"), doc, route))
    exported = ", ".join(code(n) for n in sdk_module.__all__)
    examples = "".join(
        f"\n### {title}\n\n```python\n{text}```\n" for title, text in SDK_EXAMPLES.items()
    )
    return (
        "# Python SDK\n\n`from pagefleet.client import PagefleetClient` (exported: "
        f"{exported}). Each call answers a typed model of the API's contract "
        "(`pagefleet.api`) and raises `ApiError` (with `status`, `code`, `field`) "
        "for an error answer; [routes](routes.md) lists what each route does.\n\n"
        "The client is synchronous (httpx). There is no async client: for asyncio, only "
        "`follow_async` (a job's events as they happen, as `follow` gives them) is async; "
        "run the other calls in a thread (`asyncio.to_thread`).\n\n"
        "**Sent again.** A request refused before it ran (`429`: API Gateway's throttling, "
        "the tenant's rate or queued room; a connection that could not be made) is sent "
        "again, after `Retry-After` when the answer gives one (up to 5 s: a longer one is left "
        "to you, on `ApiError.retry_after`), up to three sends in all. A "
        "request that may run twice (`GET`, `PUT`, `DELETE`, a `submit` with an "
        "`idempotency_key`, a session's steps with their `command_id`, `cancel`) is also "
        "sent again after a `502`, `503` or `504` or a connection lost on the way. A "
        "`submit` without a key is not: the job may have been recorded, and a second send "
        "would make a second job. `PagefleetClient(..., retries=Retries(attempts=1))` never "
        "sends again (`pagefleet.client.retries`).\n\n"
        "## Examples\n" + examples + "\n## `PagefleetClient`\n\nThe route column lists every "
        "API route a method calls (read from the client's code); a method without one calls "
        "no route of the API (`download` fetches a presigned storage URL).\n\n"
        + table(("method", "what it does", "route"), rows)
    )
