"""One release number, said everywhere an operator looks: the CLI, the package metadata, the
OpenAPI document, the stack's outputs (tests/infra) and GET /v1/health (tests/e2e)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from typer.testing import CliRunner

import pagefleet
from functions.api.app import app  # at import: its tracer is made before sockets are blocked
from functions.api.openapi import openapi_schema
from pagefleet import cli

REPO = Path(__file__).resolve().parents[2]


def test_pagefleet_version_prints_the_release_and_runs_no_command() -> None:
    run = CliRunner().invoke(cli.app, ["--version"])
    assert run.exit_code == 0, run.output
    assert run.output == f"pagefleet {pagefleet.__version__}\n"


def test_the_package_metadata_says_the_same_release() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["version"] == pagefleet.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", pagefleet.__version__)


def test_the_openapi_documents_version_is_the_release() -> None:
    import json

    assert openapi_schema(app)["info"]["version"] == pagefleet.__version__
    committed = json.loads((REPO / "docs" / "openapi.json").read_text())
    assert committed["info"]["version"] == pagefleet.__version__
    health = committed["paths"]["/health"]["get"]
    assert health["security"] == []  # keyless, like the document itself
    assert health["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/HealthView"
    }


def test_the_changelog_has_an_entry_for_the_release_or_unreleased_work() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings and headings[0] == "Unreleased", headings[:2]
    assert f"{pagefleet.__version__} " in " ".join(h + " " for h in headings)


def test_every_cdk_command_in_the_guides_runs_the_cli_cdk_json_pins() -> None:
    """The CLI must read what the locked aws-cdk-lib writes: one pinned CLI, named in
    cdk.json, is what the guides run (docs/deploy.md, "Pin the CDK CLI")."""
    import json

    pinned = json.loads((REPO / "cdk.json").read_text())["context"]["pagefleet:cdkCliVersion"]
    assert re.fullmatch(r"2\.1\d{3}\.\d+", pinned), pinned  # the CLI's own version line
    named = {
        (page.name, version)
        for page in [*(REPO / "docs").glob("*.md"), REPO / "README.md"]
        for version in re.findall(r"aws-cdk@([\w.]+)", page.read_text())
    }
    assert named and {version for _, version in named} == {pinned}, named
