"""What every command shares: consoles, exit codes, the API options and client, errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console

from pagefleet.client import PagefleetClient
from pagefleet.errors import InvalidField

if TYPE_CHECKING:
    from pagefleet.runtime import Runtime

# Exit codes: 0 ok, 1 a job or example did not succeed, 2 bad input, 3 API / service error.
EXIT_FAILED, EXIT_USAGE, EXIT_SERVICE = 1, 2, 3

console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


class CliError(Exception):
    """A mistake or failure to report in one line (no traceback), with its exit code."""

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


def api_client(api_url: str | None, api_key: str | None) -> PagefleetClient:
    if not api_url:
        raise CliError("no API URL: pass --api-url or set PAGEFLEET_API_URL")
    if not api_key:
        raise CliError("no API key: pass --api-key or set PAGEFLEET_API_KEY")
    if not api_url.startswith(("http://", "https://")):
        raise CliError(f"API URL must start with http:// or https://, got {api_url!r}")
    return PagefleetClient(api_url, api_key)


def aws() -> Runtime:
    """The process's AWS clients and adapters, for the operator commands that use AWS
    credentials (the CLI's composition root; the other commands talk to the API only)."""
    from pagefleet.runtime import RUNTIME  # boto3: +0.15 s of CPU on every command's start

    return RUNTIME


def validation_lines(details: list[dict[str, Any]]) -> list[str]:
    return [
        f"  {d.get('field', '?')}: {d.get('reason', d.get('message', 'invalid'))}" for d in details
    ]


def pydantic_details(exc: ValidationError) -> list[dict[str, Any]]:
    """The problems as the API would list them ({field, reason})."""
    return list(InvalidField.from_errors(exc.errors()).details["details"])


def fail(message: str, code: int) -> NoReturn:
    err.print(f"[red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)
