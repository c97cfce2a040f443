"""URL globs Playwright would refuse (a nested or unmatched ``{...}`` group) are a 422 when
the job is made, where Playwright refused them in the worker after a claim and a context;
an input's braces, and a record written before the rule, are the worker's to meet."""

from __future__ import annotations

from typing import Any

import pytest
from playwright._impl.isomorphic.url_match import resolve_glob_to_regex_pattern
from pydantic import ValidationError

from browser_task.run.url_patterns import SearchBudget, glob_matcher
from pagefleet.jobs.models import JobRequest
from pagefleet.specs.stored import STORED
from pagefleet.workflow.globs import glob_problem

GOTO = {"action": "goto", "url": "http://127.0.0.1:9/"}


@pytest.mark.parametrize(
    ("glob", "reason"),
    [
        ("**/a{b", "no '}' closes"),
        ("**/a}b", "no '{' opened"),
        ("**/{a,{b,c}}", "nests"),
    ],
)
def test_the_globs_playwright_refuses_are_refused_by_the_same_rules(glob: str, reason: str) -> None:
    problem = glob_problem(glob)
    assert problem is not None and reason in problem
    with pytest.raises(Exception, match="Invalid glob pattern"):
        resolve_glob_to_regex_pattern(None, glob)  # what the worker would have met


@pytest.mark.parametrize(
    "glob", ["**/api/**", "**/{a,b}/*.png", "**/\\{literal", "{{inputs.site}}/api/{x,y}", "*"]
)
def test_the_globs_playwright_reads_are_kept(glob: str) -> None:
    assert glob_problem(glob) is None


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"steps": [{"action": "route", "url": "**/a{b", "abort": True}, GOTO]}, "route.url"),
        ({"steps": [GOTO, {"action": "wait_for", "url": "**/{a,{b}}"}]}, "wait_for.url"),
        ({"steps": [GOTO], "options": {"block": {"urls": ["**/ads/**", "x}"]}}}, "block.urls"),
    ],
)
def test_a_job_with_such_a_glob_is_refused_naming_the_field(
    body: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        JobRequest.model_validate(body)
    fields = [".".join(str(p) for p in e["loc"]) for e in refused.value.errors()]
    assert any(f.endswith(where) for f in fields), fields
    # A record written before the rule reads as it was written.
    assert JobRequest.model_validate(body, context=STORED)


def test_a_glob_the_worker_cannot_read_matches_nothing_and_fails_the_job() -> None:
    budget = SearchBudget()
    matches = glob_matcher("**/a{b", budget)  # from a record written before the rule
    assert matches("http://127.0.0.1/a{b") is False
    assert budget.overrun is not None and "unmatched" in budget.overrun
    with pytest.raises(Exception, match="is not a glob Playwright reads"):
        budget.raise_overrun()
