"""``pagefleet submit`` checks a workflow file before sending it, naming each bad field as
the API would (no API is reached: the check refuses first)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pagefleet import cli
from pagefleet.cli.common import EXIT_USAGE


def test_every_problem_of_a_workflow_file_is_named_by_its_field(tmp_path: Path) -> None:
    workflow = tmp_path / "bad.json"
    workflow.write_text(json.dumps({"steps": [{"action": "click"}], "max_attempts": 99}))
    result = CliRunner().invoke(
        cli.app,
        ["submit", str(workflow), "--api-url", "http://127.0.0.1:9", "--api-key", "pf_x"],
    )
    assert result.exit_code == EXIT_USAGE, result.output
    assert "is not a valid workflow" in result.output
    assert "steps[0].click.selector: Field required" in result.output
    assert "max_attempts:" in result.output
