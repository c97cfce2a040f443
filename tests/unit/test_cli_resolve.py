"""`pagefleet resolve`: the person's answer must be given, and --continue only with --done;
both are refused before anything is sent (the answers themselves: tests/e2e)."""

from __future__ import annotations

from typer.testing import CliRunner

from pagefleet import cli
from pagefleet.cli.common import EXIT_USAGE

# Nothing listens here: a command that got past its checks would fail differently.
ENV = {"PAGEFLEET_API_URL": "http://127.0.0.1:9", "PAGEFLEET_API_KEY": "pf_x", "COLUMNS": "200"}


def test_resolve_needs_done_or_not_done() -> None:
    run = CliRunner().invoke(cli.app, ["resolve", "01abc"], env=ENV)
    assert run.exit_code == EXIT_USAGE
    assert "--done or --not-done" in run.output


def test_continue_goes_with_done_only() -> None:
    run = CliRunner().invoke(cli.app, ["resolve", "01abc", "--not-done", "--continue"], env=ENV)
    assert run.exit_code == EXIT_USAGE
    assert "--continue goes with --done" in run.output
