"""The workflow language: every step kind parses, bad steps say what is wrong."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from pagefleet.jobs.models import JobRequest
from pagefleet.workflow import Paginate, iter_steps

EVERY_STEP = [
    {"action": "use_session", "name": "shop-login", "required": False},
    {"action": "goto", "url": "{{inputs.site}}/login", "wait_until": "domcontentloaded"},
    {"action": "fill", "selector": "#user", "value": "{{inputs.user}}"},
    {"action": "type", "selector": "#password", "text": "{{secrets.SHOP_PASSWORD}}", "delay_ms": 5},
    {"action": "press", "selector": "#password", "key": "Enter"},
    {"action": "wait_for", "url": "**/account"},
    {"action": "save_session", "name": "shop-login"},
    {"action": "select", "selector": "#country", "text": "France"},
    {"action": "check", "selector": "#terms"},
    {"action": "uncheck", "selector": "#newsletter"},
    {"action": "hover", "selector": "nav .menu"},
    {"action": "scroll", "to_bottom": True},
    {"action": "upload", "selector": "input[type=file]", "input": "cv", "filename": "cv.txt"},
    {"action": "click", "selector": "text=Orders"},
    {
        "action": "paginate",
        "next": "a[rel=next]",
        "max_pages": 5,
        "steps": [
            {
                "action": "extract",
                "name": "orders",
                "selector": "table tr.order",
                "fields": {
                    "id": {"selector": "td.id"},
                    "link": {"selector": "a", "kind": "attribute", "attribute": "href"},
                },
            }
        ],
    },
    {"action": "assert", "text_contains": "Orders"},
    {"action": "assert", "selector": "#logout", "visible": True},
    {"action": "assert", "url_matches": r"/account(/.*)?$"},
    {"action": "screenshot", "name": "orders.png", "full_page": True},
    {"action": "screenshot", "name": "table.png", "selector": "table"},
    {"action": "pdf", "name": "orders.pdf"},
    {"action": "download", "selector": "#export"},
    {"action": "evaluate", "expression": "document.title", "name": "title"},
    {"action": "sleep", "ms": 100},
]


def test_every_step_kind_parses() -> None:
    request = JobRequest.model_validate(
        {"steps": EVERY_STEP, "inputs": {"site": "http://127.0.0.1:1", "user": "ann", "cv": "hi"}}
    )
    kinds = {step.action for _, step in iter_steps(request.steps)}
    assert len(kinds) == 22
    assert request.secret_names() == {"SHOP_PASSWORD"}


def test_paths_of_nested_steps() -> None:
    request = JobRequest.model_validate({"steps": EVERY_STEP[14:15]})
    assert isinstance(request.steps[0], Paginate)
    assert [p for p, _ in iter_steps(request.steps)] == ["0", "0.steps[0]"]


def test_unknown_input_inside_a_nested_block_is_refused() -> None:
    nested = {
        "action": "paginate",
        "next": "a.next",
        "steps": [{"action": "fill", "selector": "#q", "value": "{{inputs.query}}"}],
    }
    with pytest.raises(ValidationError, match=r"steps\[0\.steps\[0\]\] uses \{\{inputs\.query\}\}"):
        JobRequest.model_validate({"steps": [nested]})


def test_upload_needs_its_input() -> None:
    step = {"action": "upload", "selector": "#f", "input": "doc", "filename": "a.txt"}
    with pytest.raises(ValidationError, match="uploads input 'doc'"):
        JobRequest.model_validate({"steps": [step]})


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"action": "select", "selector": "#c"}, "exactly one of value, text or index"),
        ({"action": "scroll"}, "exactly one of selector, x/y or to_bottom"),
        ({"action": "assert"}, "exactly one of text_contains"),
        ({"action": "assert", "visible": True}, "needs a selector"),
        ({"action": "assert", "url_matches": "(["}, "not a valid regular expression"),
        ({"action": "sleep", "ms": 3_600_000}, "less than or equal to 60000"),
        ({"action": "paginate", "next": "a", "steps": []}, "at least 1"),
        ({"action": "download", "selector": "a", "name": "../x"}, "pattern"),
        (
            {
                "action": "extract",
                "name": "x",
                "selector": "tr",
                "fields": {"a": {"kind": "attribute"}},
            },
            "attribute is required",
        ),
        (
            {"action": "extract", "name": "n", "selector": "li", "kind": "count", "many": True},
            "kind 'count' gives one number",
        ),
        (
            {
                "action": "extract",
                "name": "rows",
                "selector": "tr",
                "fields": {"a": {"kind": "count"}},
            },
            "count is for a whole extract",
        ),
        (
            {"action": "click", "selector": "#b", "frame": []},
            "frame lists 1 to 10",
        ),
    ],
)
def test_bad_steps_say_what_is_wrong(step: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace("[", r"\[")):
        JobRequest.model_validate({"steps": [step]})


def test_options_are_validated() -> None:
    ok = JobRequest.model_validate(
        {
            "steps": [{"action": "goto", "url": "http://127.0.0.1:1"}],
            "options": {"locale": "fr-FR", "timezone_id": "Europe/Paris", "user_agent": "pf"},
        }
    )
    assert ok.options.timezone_id == "Europe/Paris"
    with pytest.raises(ValidationError, match="unknown time zone"):
        JobRequest.model_validate(
            {"steps": [{"action": "goto", "url": "x"}], "options": {"timezone_id": "Mars/Base"}}
        )


def test_schema_covers_every_step() -> None:
    schema = json.dumps(JobRequest.model_json_schema())
    for step in EVERY_STEP:
        assert f'"const": "{step["action"]}"' in schema


def test_a_frame_may_be_one_selector_or_a_path_of_nested_ones() -> None:
    one = JobRequest.model_validate(
        {"steps": [{"action": "click", "selector": "#b", "frame": "#f"}]}
    )
    nested = JobRequest.model_validate(
        {"steps": [{"action": "click", "selector": "#b", "frame": ["#outer", "#inner"]}]}
    )
    assert getattr(one.steps[0], "frame") == "#f"  # noqa: B009
    assert getattr(nested.steps[0], "frame") == ["#outer", "#inner"]  # noqa: B009


def test_blocks_nested_too_deep_are_refused_naming_the_step_before_parsing() -> None:
    def nested(levels: int) -> dict[str, object]:
        step: dict[str, object] = {"action": "extract", "name": "t", "selector": "h1"}
        for _ in range(levels):
            step = {"action": "paginate", "next": "a.next", "steps": [step]}
        return {"steps": [step]}

    assert JobRequest.model_validate(nested(3)).steps[0].action == "paginate"
    for levels in (4, 200, 5_000):  # no RecursionError, however deep
        with pytest.raises(
            ValidationError, match=r"steps\[0\]\.steps\[0\]\.steps\[0\]\.steps\[0\] "
        ):
            JobRequest.model_validate(nested(levels))
