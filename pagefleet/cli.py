"""The ``pagefleet`` command line: the local stack, job commands over HTTP, key admin.

Job commands talk to the API as any client does; the URL and key come from ``--api-url`` /
``--api-key`` or ``PAGEFLEET_API_URL`` / ``PAGEFLEET_API_KEY``. Bad input ends with a clear
message and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import httpx
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from pagefleet.client import ApiError, Job, PagefleetClient
from pagefleet.models import JobRequest

# Exit codes: 0 ok, 1 a job or example did not succeed, 2 bad input, 3 API / service error.
EXIT_FAILED, EXIT_USAGE, EXIT_SERVICE = 1, 2, 3

console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

app = typer.Typer(
    help="pagefleet: serverless browser automation. Run it locally, submit jobs, manage keys.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
local_app = typer.Typer(help="The local stack (embedded AWS, API, workers, demo site).")
admin_app = typer.Typer(help="Tenant API keys (needs PAGEFLEET_TENANTS_TABLE and AWS credentials).")
app.add_typer(local_app, name="local")
app.add_typer(admin_app, name="admin")


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


ApiUrl = Annotated[
    str | None, typer.Option("--api-url", envvar="PAGEFLEET_API_URL", help="API base URL.")
]
ApiKey = Annotated[
    str | None,
    typer.Option("--api-key", envvar="PAGEFLEET_API_KEY", help="API key.", show_default=False),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


def _client(api_url: str | None, api_key: str | None) -> PagefleetClient:
    if not api_url:
        raise CliError("no API URL: pass --api-url or set PAGEFLEET_API_URL")
    if not api_key:
        raise CliError("no API key: pass --api-key or set PAGEFLEET_API_KEY")
    if not api_url.startswith(("http://", "https://")):
        raise CliError(f"API URL must start with http:// or https://, got {api_url!r}")
    return PagefleetClient(api_url, api_key)


# --- rendering -------------------------------------------------------------------------------
_STATUS_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "timed_out": "red",
    "dead_lettered": "red",
    "cancelled": "yellow",
    "expired": "yellow",
    "running": "cyan",
    "queued": "blue",
    "retry_scheduled": "magenta",
}


def _status(job: Job) -> str:
    value = job.status.value
    return f"[{_STATUS_STYLE.get(value, 'white')}]{value}[/]"


def _print_job(job: Job) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    table.add_row("job", job.job_id)
    table.add_row("status", _status(job))
    if job.name:
        table.add_row("name", job.name)
    table.add_row("attempt", str(job.attempt))
    for label in ("created_at", "started_at", "finished_at"):
        value = getattr(job, label)
        if value:
            table.add_row(label.replace("_at", ""), value)
    if job.error:
        where = f"step {job.error.step_index}" if job.error.step_index is not None else ""
        if job.error.step:
            where += f" {job.error.step}"
        table.add_row("error", f"[red]{job.error.kind}[/] {where}: {job.error.message}".strip())
    if job.artifacts:
        table.add_row("artifacts", ", ".join(f"{a.name} ({a.size} B)" for a in job.artifacts))
    console.print(table)
    if job.result:
        console.print_json(json.dumps(job.result))


def _validation_lines(details: list[dict[str, Any]]) -> list[str]:
    return [
        f"  {d.get('field', '?')}: {d.get('reason', d.get('message', 'invalid'))}" for d in details
    ]


def _pydantic_details(exc: ValidationError) -> list[dict[str, Any]]:
    out = []
    for error in exc.errors():
        path = ""
        for part in error.get("loc", ()):
            path += f"[{part}]" if isinstance(part, int) else ("." if path else "") + str(part)
        out.append({"field": path or "body", "reason": error.get("msg", "invalid")})
    return out


def _fail(message: str, code: int) -> NoReturn:
    err.print(f"[red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


# --- job commands ----------------------------------------------------------------------------
def _parse_input(pair: str) -> tuple[str, Any]:
    name, sep, raw = pair.partition("=")
    if not sep or not name:
        raise CliError(f"--input expects NAME=VALUE, got {pair!r}")
    try:
        value = json.loads(raw)
        if not isinstance(value, str | int | float | bool):
            value = raw
    except ValueError:
        value = raw
    return name.strip(), value


def _load_workflow(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise CliError(f"{path}: no such file")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:
            raise CliError("YAML workflows need PyYAML; use JSON or install pyyaml") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise CliError(f"{path} is not valid YAML: {exc}") from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"{path} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from exc
    if not isinstance(data, dict):
        raise CliError(f"{path}: a workflow is a JSON object with 'steps'")
    return data


@app.command()
def submit(
    file: Annotated[Path, typer.Argument(help="Workflow file (JSON, or YAML with PyYAML).")],
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the job is final.")] = False,
    inputs: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="NAME=VALUE, repeatable.")
    ] = None,
    idempotency_key: Annotated[str | None, typer.Option("--idempotency-key")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait with --wait.")] = 300,
    local_check: Annotated[
        bool, typer.Option("--local-check/--no-local-check", help="Validate before sending.")
    ] = True,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Submit a workflow file as a job."""
    workflow = _load_workflow(file)
    for pair in inputs or []:
        name, value = _parse_input(pair)
        workflow.setdefault("inputs", {})
        if isinstance(workflow["inputs"], dict):
            workflow["inputs"][name] = value
    if local_check:
        try:
            JobRequest.model_validate(workflow)
        except ValidationError as exc:
            lines = _validation_lines(_pydantic_details(exc))
            _fail(f"{file} is not a valid workflow:\n" + "\n".join(lines), EXIT_USAGE)
    with _client(api_url, api_key) as client:
        job = client.submit(workflow, idempotency_key=idempotency_key)
        if not wait:
            if as_json:
                console.print_json(job.model_dump_json())
            else:
                console.print(f"submitted [bold]{job.job_id}[/] ({_status(job)})")
            return
        if not as_json:
            console.print(f"submitted [bold]{job.job_id}[/], waiting…")
        job = client.wait(job.job_id, timeout=timeout)
        if as_json:
            console.print_json(job.model_dump_json())
        else:
            _print_job(job)
            if job.artifacts:
                _print_artifacts(client.artifacts(job.job_id))
    if job.status.value != "succeeded":
        raise typer.Exit(EXIT_FAILED)


@app.command()
def status(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Show one job."""
    with _client(api_url, api_key) as client:
        job = client.get(job_id)
    if as_json:
        console.print_json(job.model_dump_json())
    else:
        _print_job(job)


@app.command()
def cancel(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Cancel a job: a queued one at once, a running one within seconds."""
    with _client(api_url, api_key) as client:
        job = client.cancel(job_id)
    if as_json:
        console.print_json(job.model_dump_json())
    elif job.status.value == "cancelled":
        console.print(f"[bold]{job.job_id}[/] cancelled")
    else:
        console.print(f"[bold]{job.job_id}[/] is {_status(job)}; its worker is stopping it")


@app.command("dead-letters")
def dead_letters(
    redrive: Annotated[
        bool, typer.Option("--redrive", help="Send every dead-lettered job back to its queue.")
    ] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Dead-lettered jobs of every tenant (needs an admin key); --redrive sends them back."""
    with _client(api_url, api_key) as client:
        if redrive:
            done = client.redrive()
            console.print(f"redriven: {len(done)} job(s)")
            return
        listed = client.dead_letters()
    table = Table("job", "error", "updated")
    for job in listed:
        table.add_row(job.job_id, job.error.message if job.error else "", job.updated_at or "")
    console.print(table)


@app.command()
def jobs(
    status: Annotated[str | None, typer.Option("--status", help="Only jobs in this state.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 20,
    cursor: Annotated[str | None, typer.Option("--cursor")] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """List jobs, newest first."""
    with _client(api_url, api_key) as client:
        page = client.list(status=status, limit=limit, cursor=cursor)
    if as_json:
        console.print_json(page.model_dump_json())
        return
    table = Table("job", "status", "name", "created", "finished")
    table.columns[0].no_wrap = True
    for job in page.jobs:
        table.add_row(
            job.job_id, _status(job), job.name or "", job.created_at or "", job.finished_at or ""
        )
    console.print(table)
    if page.next_cursor:
        console.print(f"more: --cursor {page.next_cursor}")


def _print_artifacts(links: list[Any]) -> None:
    # One block per artifact: URLs and digests are printed whole so they can be copied.
    for a in links:
        console.print(f"[bold]{a.name}[/]  {a.size} B  {a.content_type}", highlight=False)
        console.print(f"  sha256 {a.sha256}", highlight=False)
        console.print(f"  {a.url}", highlight=False, markup=False)


@app.command()
def artifacts(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """List a job's artifacts with short-lived download links."""
    with _client(api_url, api_key) as client:
        links = client.artifacts(job_id)
    if as_json:
        console.print_json(json.dumps([a.model_dump() for a in links]))
    else:
        _print_artifacts(links)


@app.command()
def schema() -> None:
    """Print the JSON Schema of a job request (for editors)."""
    sys.stdout.write(json.dumps(JobRequest.model_json_schema(), indent=2) + "\n")


# --- local stack -----------------------------------------------------------------------------
@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _raise)
    # Also when started from a shell that ignores SIGINT for background jobs.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _quiet_handlers() -> None:
    # The in-process Lambda handlers log JSON to stdout; keep the console for the summary.
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")


def _print_stack(stack: Any) -> None:
    info = stack.info()
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("API", info.api_url)
    table.add_row("dev tenant key", info.dev_api_key)
    table.add_row("demo site", info.site_url)
    table.add_row("embedded AWS", info.aws_endpoint)
    table.add_row("workers", f"{stack.workers} x concurrency {stack.concurrency}")
    table.add_row("logs", str(info.log_dir))
    console.print(table)
    console.print("\nUse the CLI against it:")
    for name, value in info.env.items():
        console.print(f"  export {name}={value}", highlight=False, soft_wrap=True)
    console.print()


def _print_examples(results: list[Any]) -> bool:
    table = Table("example", "job", "status", "artifacts (sha256 checked)")
    table.columns[1].no_wrap = True
    for r in results:
        status_text = _status(r.job) if r.job else "[red]not submitted[/]"
        checks = ", ".join(
            f"{a.artifact.name} {'[green]ok[/]' if a.ok else '[red]BAD[/]'}" for a in r.artifacts
        )
        table.add_row(r.name, r.job.job_id if r.job else "", status_text, checks)
    console.print(table)
    for r in results:
        console.print(f"[bold]{r.name}[/]")
        if r.problem:
            console.print(f"  [red]problem:[/] {r.problem}", highlight=False)
        if r.job and r.job.result:
            result = json.dumps(r.job.result, ensure_ascii=False)
            console.print(f"  result: {result}", highlight=False, markup=False)
        for a in r.artifacts:
            console.print(f"  {a.artifact.name}: {a.artifact.url}", highlight=False, markup=False)
            if a.problem:
                console.print(f"    [red]{a.problem}[/]", highlight=False)
    ok = all(r.ok for r in results) and bool(results)
    verdict = "[green]all examples succeeded[/]" if ok else "[red]some examples did not succeed[/]"
    console.print(verdict)
    return ok


def _start_stack(api_port: int, workers: int, concurrency: int) -> Any:
    from devstack.stack import LocalStack, StackError

    _quiet_handlers()
    stack = LocalStack(api_port=api_port, workers=workers, concurrency=concurrency)
    with console.status("starting the local stack…"):
        try:
            stack.start()
        except StackError as exc:
            raise CliError(str(exc), EXIT_SERVICE) from exc
    return stack


@local_app.command("up")
def local_up(
    api_port: Annotated[
        int, typer.Option(help="API port on 127.0.0.1 (0 = any free port).")
    ] = 8080,
    workers: Annotated[int, typer.Option(min=0, help="Worker processes.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Jobs per worker at once.")] = 2,
    examples: Annotated[bool, typer.Option("--examples/--no-examples")] = True,
) -> None:
    """Start everything on loopback and keep it running until Ctrl-C."""
    from devstack.examples import run_examples

    with _sigterm_as_interrupt():
        stack = _start_stack(api_port, workers, concurrency)
        try:
            _print_stack(stack)
            if examples and workers:
                with console.status("running the example workflows…"), stack.client() as client:
                    results = run_examples(client, stack.site_url)
                _print_examples(results)
            console.print("running; press Ctrl-C to stop")
            while True:
                time.sleep(1)
                dead = stack.dead_children()
                if dead:
                    names = ", ".join(p.name for p in dead)
                    raise CliError(
                        f"{names} exited; last log lines:\n{dead[0].tail()}", EXIT_SERVICE
                    )
        except KeyboardInterrupt:
            console.print("\nstopping…")
        finally:
            stack.stop()
            console.print("stopped")


@app.command()
def demo(
    api_port: Annotated[int, typer.Option(help="API port on 127.0.0.1 (0 = any free port).")] = 0,
    workers: Annotated[int, typer.Option(min=1)] = 1,
    concurrency: Annotated[int, typer.Option(min=1)] = 2,
) -> None:
    """Start the local stack, run every example, check artifacts, stop. Exit 0 only if all pass."""
    from devstack.examples import run_examples

    with _sigterm_as_interrupt():
        stack = _start_stack(api_port, workers, concurrency)
        try:
            console.print(f"local stack up: API {stack.api_url}, demo site {stack.site_url}")
            with console.status("running the example workflows…"), stack.client() as client:
                results = run_examples(client, stack.site_url)
            ok = _print_examples(results)
            if not ok:
                console.print(f"logs: {stack.log_dir}")
        finally:
            stack.stop()
    if not ok:
        raise typer.Exit(EXIT_FAILED)
    stack.cleanup_logs()


# --- admin -----------------------------------------------------------------------------------
TenantsTable = Annotated[
    str | None, typer.Option("--tenants-table", envvar="PAGEFLEET_TENANTS_TABLE")
]


def _tenant_store(table: str | None) -> Any:
    from pagefleet.runtime import RUNTIME

    if not table:
        raise CliError("no tenants table: pass --tenants-table or set PAGEFLEET_TENANTS_TABLE")
    return RUNTIME.tenant_store(table)


@admin_app.command("create-key")
def create_key(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant id.")],
    name: Annotated[str, typer.Option("--name")] = "default",
    admin: Annotated[bool, typer.Option("--admin", help="Grant admin rights.")] = False,
    tenants_table: TenantsTable = None,
) -> None:
    """Create an API key; the key is shown once."""
    from pagefleet.tenants import create_api_key

    key, record = create_api_key(_tenant_store(tenants_table), tenant, name=name, admin=admin)
    console.print(
        f"tenant [bold]{record.tenant_id}[/] key id [bold]{record.key_id}[/] (shown once):"
    )
    sys.stdout.write(key + "\n")


@admin_app.command("list-keys")
def list_keys(
    tenant: Annotated[str, typer.Option("--tenant")], tenants_table: TenantsTable = None
) -> None:
    """List a tenant's keys (ids only; keys are stored hashed)."""
    table = Table("key id", "name", "created", "admin", "revoked")
    for _, rec in _tenant_store(tenants_table).keys_of(tenant):
        table.add_row(rec.key_id, rec.name, rec.created_at, str(rec.admin), str(rec.revoked))
    console.print(table)


@admin_app.command("revoke-key")
def revoke_key(
    tenant: Annotated[str, typer.Option("--tenant")],
    key_id: Annotated[str, typer.Option("--key-id")],
    tenants_table: TenantsTable = None,
) -> None:
    """Revoke a key (API Gateway may honour a cached authorization for up to 5 minutes)."""
    from pagefleet.tenants import revoke_key as revoke

    revoke(_tenant_store(tenants_table), tenant, key_id)
    console.print(f"revoked key {key_id} of tenant {tenant}")


@admin_app.command("rotate-key")
def rotate_key(
    tenant: Annotated[str, typer.Option("--tenant")],
    key_id: Annotated[str, typer.Option("--key-id")],
    tenants_table: TenantsTable = None,
) -> None:
    """Issue a new key with the same name and rights, and revoke the old one."""
    from pagefleet.tenants import rotate_key as rotate

    key, record = rotate(_tenant_store(tenants_table), tenant, key_id)
    console.print(f"new key id [bold]{record.key_id}[/] (shown once); {key_id} revoked:")
    sys.stdout.write(key + "\n")


# --- entry point -----------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    from pagefleet.errors import PagefleetError

    try:
        app(args=argv, prog_name="pagefleet")
    except CliError as exc:
        _report(str(exc), exc.code)
    except ApiError as exc:
        fields = [d for d in exc.details if "field" in d]
        head = f"API refused the request ({exc.status} {exc.code})"
        lines = [f"{head}:", *_validation_lines(fields)] if fields else [f"{head}: {exc.message}"]
        _report("\n".join(lines), EXIT_USAGE if 400 <= exc.status < 500 else EXIT_SERVICE)
    except httpx.HTTPError as exc:
        _report(f"cannot reach the API: {exc}", EXIT_SERVICE)
    except TimeoutError as exc:
        _report(str(exc), EXIT_FAILED)
    except PagefleetError as exc:
        field = exc.details.get("field")
        _report(f"{field + ': ' if field else ''}{exc.message}", EXIT_USAGE)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        _report(f"AWS refused: {error.get('Code')}: {error.get('Message')}", EXIT_SERVICE)
    except BotoCoreError as exc:
        _report(f"AWS call failed: {exc}", EXIT_SERVICE)


def _report(message: str, code: int) -> NoReturn:
    err.print(f"[red]error:[/] {message}", highlight=False)
    sys.exit(code)


if __name__ == "__main__":
    main()
