"""``expect``: a bad schema is refused naming expect.schema; a result is checked against the
schema and the shorthands, each breach named by its path."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pagefleet.errors import field_path
from pagefleet.jobs.models import JobRequest
from pagefleet.monitors.expect import Expect, breaches, summary

STEPS = [{"action": "goto", "url": "https://shop.example/"}]
SCHEMA = {
    "type": "object",
    "required": ["products"],
    "properties": {
        "products": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sku", "price"],
                "properties": {"price": {"type": "number", "minimum": 0}},
            },
        }
    },
}


def refused_field(expect: object) -> str:
    with pytest.raises(ValidationError) as refused:
        JobRequest.model_validate({"steps": STEPS, "expect": expect})
    return field_path(refused.value.errors()[0]["loc"])


def test_a_schema_that_is_not_one_is_refused_on_expect_schema() -> None:
    assert refused_field({"schema": {"type": "nope"}}) == "expect.schema"
    assert refused_field({"schema": {"minItems": -1}}) == "expect.schema"


def test_a_remote_reference_is_refused_never_fetched() -> None:
    with pytest.raises(ValidationError) as refused:
        JobRequest.model_validate(
            {"steps": STEPS, "expect": {"schema": {"$ref": "http://169.254.169.254/x"}}}
        )
    assert "never fetched" in str(refused.value)
    inside = {"$defs": {"p": {"type": "number"}}, "properties": {"n": {"$ref": "#/$defs/p"}}}
    assert Expect.model_validate({"schema": inside}).json_schema == inside


def test_shorthands_need_paths_and_expect_needs_something() -> None:
    assert refused_field({}) == "expect"
    assert refused_field({"min_items": {"a b": 1}}) == "expect.min_items"
    assert refused_field({"not_empty": ["x..y"]}) == "expect.not_empty"


def test_a_good_result_has_no_breach() -> None:
    expect = Expect.model_validate(
        {"schema": SCHEMA, "min_items": {"products": 1}, "not_empty": ["title"]}
    )
    good = {"title": "Shop", "products": [{"sku": "k1", "price": 3}]}
    assert breaches(good, expect) == []


def test_every_breach_is_named_by_its_path_and_why() -> None:
    expect = Expect.model_validate(
        {"schema": SCHEMA, "min_items": {"products": 1, "page.items": 2}, "not_empty": ["title"]}
    )
    found = breaches({"title": "", "products": [], "page": {"items": "no"}}, expect)
    assert [(b.path, b.reason) for b in found] == [
        ("result.products", "has 0 items, expected at least 1"),
        ("result.page.items", "is a string, not a list"),
        ("result.title", 'is empty ("")'),
    ]
    found = breaches({"products": [{"sku": "k", "price": -1}, {"price": 2}]}, expect)
    paths = {b.path: b.reason for b in found}
    assert paths["result.products[0].price"] == "-1 is less than the minimum of 0"
    assert paths["result.products[1]"] == "'sku' is a required property"
    assert paths["result.title"] == "is missing"
    assert summary(found).startswith("the result does not meet expect: result.")


def test_a_remote_reference_inside_a_stored_schema_fails_without_a_fetch() -> None:
    # Built around the model's check (an older record, say): the validator fetches nothing.
    expect = Expect.model_construct(json_schema={"$ref": "http://127.0.0.1:9/x"})
    with pytest.raises(Exception, match="Unresolvable"):
        breaches({}, expect)
