"""The ``pagefleet`` command line: the local stack, job commands over HTTP, key admin.

Job commands talk to the API as any client does; the URL and key come from ``--api-url`` /
``--api-key`` or ``PAGEFLEET_API_URL`` / ``PAGEFLEET_API_KEY``. Bad input ends with a clear
message and a non-zero exit code, never a traceback.

The commands live in ``jobs`` (job commands), ``admin`` (dead letters, API keys) and
``local`` (the local stack: the one module that starts ``devstack``); this module is the
command table and the entry point.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import httpx
import typer
from botocore.exceptions import BotoCoreError, ClientError

import pagefleet
from pagefleet.cli import (
    admin,
    browser_sessions,
    dispatch,
    fleet,
    follow,
    jobs,
    local,
    monitors,
    notify,
    tenancy,
)
from pagefleet.cli.common import (
    EXIT_FAILED,
    EXIT_SERVICE,
    EXIT_USAGE,
    CliError,
    err,
    validation_lines,
)
from pagefleet.client import ApiError
from pagefleet.errors import PagefleetError

app = typer.Typer(
    help="pagefleet: serverless browser automation. Run it locally, submit jobs, manage keys.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"pagefleet {pagefleet.__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_show_version,
        is_eager=True,
        help="Print this pagefleet's release and exit (a stage's: GET /v1/health).",
    ),
) -> None:
    """pagefleet: serverless browser automation. Run it locally, submit jobs, manage keys."""


app.add_typer(local.local_app, name="local")
app.add_typer(admin.admin_app, name="admin")
app.add_typer(notify.webhooks_app, name="webhooks")
admin.admin_app.command("signing-secret")(notify.admin_signing_secret)
app.add_typer(dispatch.workflows_app, name="workflows")
app.add_typer(dispatch.schedules_app, name="schedules")
app.command()(jobs.submit)
app.command()(jobs.status)
app.command()(follow.follow)
app.command()(jobs.cancel)
app.command()(jobs.resolve)
app.command("continue")(jobs.continue_)
app.command("hand-back")(jobs.hand_back)
app.command()(jobs.replay)
app.command("dead-letters")(admin.dead_letters)
app.command()(jobs.jobs)
app.command()(jobs.artifacts)
app.command()(monitors.changes)
app.command()(jobs.schema)
app.command()(jobs.mcp)
app.command()(fleet.stats)
app.command()(local.demo)
app.command()(tenancy.usage)
app.command()(tenancy.tenant)
app.command()(tenancy.delete)
app.add_typer(tenancy.sessions_app, name="sessions")
app.add_typer(browser_sessions.browser_sessions_app, name="browser-sessions")
admin.admin_app.command("set-limits")(tenancy.set_limits)
admin.admin_app.command("limits")(tenancy.limits)
admin.admin_app.command("usage")(tenancy.every_tenant_usage)
admin.admin_app.command("audit")(tenancy.audit)


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, prog_name="pagefleet")
    except CliError as exc:
        _report(str(exc), exc.code)
    except ApiError as exc:
        fields = [d for d in exc.details if "field" in d]
        head = f"API refused the request ({exc.status} {exc.code})"
        lines = [f"{head}:", *validation_lines(fields)] if fields else [f"{head}: {exc.message}"]
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


__all__ = ["app", "main"]
