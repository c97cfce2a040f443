"""The examples an operator runs on a deployed stack (examples/public, docs/deploy.md): one per
step family and a monitor, each a request the API accepts, each aimed at public practice sites
the deployed egress guard lets through. Judged on their face, as the worker judges a target
before any lookup: nothing here connects anywhere.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.submission import JobSubmission, resolve_submission
from pagefleet.schedules.service import ScheduleSpec
from pagefleet.targets.egress_policy import EgressPolicy

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "examples" / "public"
JOBS = sorted(p for p in PUBLIC.glob("*.json") if not p.name.endswith(".schedule.json"))
MONITOR = PUBLIC / "price-watcher.schedule.json"


def _families() -> dict[str, set[str]]:
    """docs/api.md's family table: family -> its actions."""
    table = re.search(
        r"\| family \| steps \|\n\| --- \| --- \|\n((?:\|.*\n)+)",
        (ROOT / "docs" / "api.md").read_text(),
    )
    assert table is not None, "docs/api.md lost its step family table"
    families = {}
    for row in table.group(1).splitlines():
        family, steps = (cell.strip() for cell in row.strip("|").split("|", 1))
        families[family] = set(re.findall(r"`([a-z_]+)`", steps))
    return families


def _actions(steps: list[dict[str, Any]]) -> set[str]:
    found = set()
    for step in steps:
        found.add(step["action"])
        found |= _actions(step.get("steps", []))
    return found


def _urls(body: dict[str, Any]) -> list[str]:
    site = body.get("inputs", {}).get("site", "")
    text = json.dumps(body["steps"]).replace("{{inputs.site}}", site)
    return [step["url"] for step in json.loads(text) if step["action"] == "goto"]


def test_each_step_family_has_a_public_example_that_uses_it() -> None:
    families = _families()
    assert {"navigation", "interaction", "extraction", "capture", "control", "session"} <= set(
        families
    )
    for family, actions in families.items():
        path = PUBLIC / f"{family}.json"
        assert path.exists(), f"no public example for the {family} family"
        used = _actions(json.loads(path.read_text())["steps"])
        assert used & actions, f"{path.name} uses no {family} step"


@pytest.mark.parametrize("path", JOBS, ids=lambda p: p.stem)
def test_a_public_example_is_a_job_the_api_accepts(path: Path) -> None:
    JobRequest.model_validate(json.loads(path.read_text()))


def test_the_public_monitor_is_a_valid_schedule_with_a_valid_job() -> None:
    spec = ScheduleSpec.model_validate_json(MONITOR.read_text()).check(datetime.now(UTC))
    job = resolve_submission(JobSubmission.model_validate(spec.job), "t", None).request
    assert job.monitor is not None and job.expect is not None


@pytest.mark.parametrize("path", [*JOBS, MONITOR], ids=lambda p: p.stem)
def test_a_public_example_targets_public_names_the_deployed_guard_lets_through(path: Path) -> None:
    body = json.loads(path.read_text())
    urls = _urls(body.get("job", body))
    assert urls
    for url in urls:
        parts = urlsplit(url)
        assert parts.scheme == "https", url
        assert parts.hostname is not None
        assert EgressPolicy.host_reason(parts.hostname) is None, url
        assert not parts.hostname.replace(".", "").isdigit(), "an address, not a public name"


def test_the_operator_guide_names_every_public_example() -> None:
    guide = (ROOT / "docs" / "deploy.md").read_text()
    for path in [*JOBS, MONITOR]:
        assert f"examples/public/{path.name}" in guide, path.name
