"""An assert's ``url_matches`` is a tenant's pattern searched in a URL the page chooses, on
the event loop every slot of the worker shares: a search that backtracks without end fails
its own job (``invalid_workflow``) instead of holding that loop (with ``re``, ``(a|aa)+c``
on 60 a's takes longer than the universe has had)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from browser_task.errors import FailJob
from browser_task.run.steps.extraction import _url_matches
from browser_task.run.url_patterns import SchemaSearch, SearchBudget
from pagefleet.monitors.expect import Expect, breaches


def _on(url: str) -> Any:
    return cast(Any, SimpleNamespace(page=SimpleNamespace(url=url), url_budget=SearchBudget()))


def test_a_pattern_that_backtracks_without_end_fails_its_job_alone() -> None:
    page = _on("http://127.0.0.1:8080/" + "a" * 60)
    with pytest.raises(FailJob) as failed:
        asyncio.run(_url_matches(r"(a|aa)+c", page, timeout_ms=5_000))
    assert failed.value.kind == "invalid_workflow"
    assert "backtracks" in str(failed.value) and "(a|aa)+c" in str(failed.value)


def test_a_pattern_is_searched_anywhere_in_the_url_in_res_dialect() -> None:
    asyncio.run(_url_matches(r"/table/\d+$", _on("http://127.0.0.1/table/42"), timeout_ms=100))
    asyncio.run(_url_matches(r"(?P<id>\d+)", _on("http://127.0.0.1/table/42"), timeout_ms=100))
    with pytest.raises(AssertionError):  # not there within the step's time: the assert fails
        asyncio.run(_url_matches(r"/chairs/", _on("http://127.0.0.1/table/42"), timeout_ms=100))


def test_a_result_schema_pattern_that_backtracks_is_a_breach_not_a_stalled_worker() -> None:
    hungry = "(a|aa)+c"
    expect = Expect.model_validate(
        {
            "schema": {
                "properties": {
                    "name": {"pattern": hungry},
                    "names": {"items": {"pattern": hungry}},
                },
                "patternProperties": {hungry: {"type": "integer"}},
            }
        }
    )
    # Page data (with re: weeks for the first value); after one search ran out of time the
    # check's other searches end at once, so 500 more cost nothing.
    result = {"name": "a" * 60, "names": ["a" * 60] * 500, "a" * 60: 1}
    found = breaches(result, expect, search=SchemaSearch())
    assert found and all("ran out of time" in b.reason for b in found), found
    assert any(b.path == "result.name" for b in found)


def test_a_schema_pattern_searches_as_jsonschema_does() -> None:
    expect = Expect.model_validate(
        {"schema": {"properties": {"code": {"pattern": "^[A-Z]{3}$"}}, "patternProperties": {}}}
    )
    assert breaches({"code": "EUR"}, expect, search=SchemaSearch()) == []
    bounded = breaches({"code": "euro"}, expect, search=SchemaSearch())
    assert [b.reason for b in bounded] == [b.reason for b in breaches({"code": "euro"}, expect)]
