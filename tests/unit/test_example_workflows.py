"""Every example workflow is a valid job request that targets the site given as input."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from devstack.examples import example_files, load_example
from pagefleet.jobs.models import JobRequest
from pagefleet.workflow import Click, Extract, Fill, Screenshot, WaitFor

EXAMPLES = example_files()


def test_there_are_at_least_three_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_validates_as_job_request(path: Path) -> None:
    request = JobRequest.model_validate(json.loads(path.read_text()))
    assert "site" in request.inputs
    assert any(isinstance(s, Screenshot) for s in request.steps)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_targets_the_site_given_as_input(path: Path) -> None:
    workflow = load_example(path, "http://127.0.0.1:5555")
    request = JobRequest.model_validate(workflow)
    assert request.inputs["site"] == "http://127.0.0.1:5555"
    assert "{{inputs.site}}" in json.dumps(json.loads(path.read_text())["steps"])


def test_examples_cover_list_extraction_form_and_navigation() -> None:
    steps = [s for p in EXAMPLES for s in JobRequest.model_validate_json(p.read_text()).steps]
    assert any(isinstance(s, Extract) and s.many and s.kind == "attribute" for s in steps)
    assert any(isinstance(s, Fill) for s in steps)
    assert any(isinstance(s, Click) for s in steps)
    assert any(isinstance(s, WaitFor) and s.url for s in steps)


def test_the_monitor_example_is_a_valid_schedule_with_a_valid_job() -> None:
    import json
    from pathlib import Path

    from pagefleet.jobs.submission import JobSubmission, resolve_submission
    from pagefleet.schedules.service import ScheduleSpec

    folder = Path(__file__).resolve().parents[2] / "examples" / "monitors"
    spec = ScheduleSpec.model_validate_json((folder / "price-watcher.schedule.json").read_text())
    checked = spec.check(datetime.now(UTC))
    job = resolve_submission(JobSubmission.model_validate(checked.job), "t", None).request
    assert spec.alert is not None and job.expect is not None and job.monitor is not None
    assert job.tracked_screenshot == "shop.png"
    for state in ("state-price-drop.json", "state-empty.json"):
        assert isinstance(json.loads((folder / state).read_text())["products"], list)
