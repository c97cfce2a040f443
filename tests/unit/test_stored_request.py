"""A job's request as its record keeps it: without its defaults, so a plain job's record is
one DynamoDB write unit a write (and one in each index it is in) until its outcome."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

from bench.write_units import item_size
from pagefleet.adapters.dynamodb.codec import (
    item_to_record,
    record_to_item,
    request_text,
    serialize,
)
from pagefleet.jobs.models import JobRequest, new_job_id
from pagefleet.jobs.states import JobStatus
from pagefleet.specs.stored import STORED
from tests.support.records import job_record
from tests.unit.test_workflow_language import EVERY_STEP

ROOT = Path(__file__).resolve().parents[2]
PLAIN = {
    "name": "plain",
    "max_attempts": 1,
    "steps": [
        {"action": "goto", "url": "http://127.0.0.1:8000/"},
        {"action": "extract", "name": "title", "selector": "h1"},
    ],
}


def _requests() -> list[tuple[str, dict[str, Any]]]:
    inputs = {"site": "http://127.0.0.1:1", "user": "ann", "cv": "hi"}
    found: list[tuple[str, dict[str, Any]]] = [
        ("every step kind", {"steps": EVERY_STEP, "inputs": inputs}),
        ("plain", PLAIN),
    ]
    for path in sorted((ROOT / "examples" / "workflows").glob("*.json")):
        data = json.loads(path.read_text())
        found.append((path.name, data.get("definition", data)))
    return found


def _stored_item(request: JobRequest) -> dict[str, Any]:
    """A queued job's item, its correlation id as long as the API's (a UUID)."""
    record = job_record(
        job_id=new_job_id(),
        status=JobStatus.QUEUED,
        request=request,
        correlation_id="a7f0b4a0-db97-43b1-8fff-e58ac6a318b3",
    )
    return serialize(record_to_item(record))


@pytest.mark.parametrize(("name", "body"), _requests(), ids=[n for n, _ in _requests()])
def test_a_stored_request_reads_back_as_submitted_and_smaller(name: str, body: Any) -> None:
    request = JobRequest.model_validate(body)
    text = request_text(request)
    back = JobRequest.model_validate(json.loads(text), context=STORED)
    assert back == request and back.model_dump(mode="json") == request.model_dump(mode="json")
    whole = json.dumps(request.model_dump(mode="json"), separators=(",", ":"))
    assert len(text) < len(whole) / 2, f"{name}: kept whole ({len(text)} bytes)"
    assert item_to_record(_stored_item(request)).request == request


def test_a_step_of_defaults_only_keeps_its_kind() -> None:
    request = JobRequest.model_validate(
        {"steps": [{"action": "goto", "url": "http://127.0.0.1:1/"}, {"action": "back"}]}
    )
    stored = json.loads(request_text(request))
    assert stored["steps"][1] == {"action": "back"}
    assert "options" not in stored and "retry" not in stored


@pytest.mark.parametrize(
    ("notify", "own"),
    [
        ({"on": ["failed"], "webhook": None}, True),  # none at all, said out loud
        ({"on": ["failed"]}, False),  # the tenant's default
        ({"webhook": "https://hooks.example.com/x"}, True),
    ],
)
def test_a_notify_keeps_whether_it_named_its_webhook(notify: dict[str, Any], own: bool) -> None:
    request = JobRequest.model_validate({**PLAIN, "notify": notify})
    back = item_to_record(_stored_item(request)).request
    assert back.notify is not None and back.notify.own_webhook is own
    assert back.notify.webhook == notify.get("webhook")


def test_a_plain_jobs_record_is_one_write_unit() -> None:
    """DynamoDB bills a write a unit per KB of the item; the request written whole (~930
    bytes of defaults and nulls) made a plain queued record 1.5 KB: two units in the table
    and two in each index, every write."""
    item = _stored_item(JobRequest.model_validate(PLAIN))
    assert item_size(item) <= 1024


DEFAULTS = Path(__file__).with_name("stored_request_defaults.json")


class _WithFactories(GenerateJsonSchema):
    """A schema that shows a ``default_factory``'s value too (pydantic leaves it out)."""

    def default_schema(self, schema: Any) -> JsonSchemaValue:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            schema = {k: v for k, v in schema.items() if k != "default_factory"}
            schema["default"] = factory()
        return super().default_schema(schema)


def request_defaults() -> dict[str, Any]:
    """Every default a request's models declare (a step's kind aside), by
    ``Model.field``: what a stored request reads back where it left a field out."""
    schema = JobRequest.model_json_schema(schema_generator=_WithFactories)
    found: dict[str, Any] = {}
    for model, node in {"JobRequest": schema, **schema.get("$defs", {})}.items():
        for field, prop in node.get("properties", {}).items():
            if "default" in prop and field != "action":
                found[f"{model}.{field}"] = prop["default"]
    return dict(sorted(found.items()))


def test_a_changed_default_is_a_decision_about_stored_jobs() -> None:
    """A record keeps its request without its defaults, so a default changed in a release
    changes every stored job that left it out (its retries, its replays, what GET shows).
    If this fails, say in docs/decisions.md why the stored jobs may take the new value, then
    write the file again: ``.venv/bin/python -m tests.unit.test_stored_request``."""
    pinned, now = json.loads(DEFAULTS.read_text()), request_defaults()
    changed = {k: (pinned[k], v) for k, v in now.items() if k in pinned and pinned[k] != v}
    gone = sorted(set(pinned) - set(now))
    assert not changed and not gone, f"defaults changed (was, now): {changed}; gone: {gone}"
    # A new field's default changes no stored job (none said it): pin it, no decision needed.
    assert set(now) <= set(pinned), f"new defaults to pin: {sorted(set(now) - set(pinned))}"


if __name__ == "__main__":
    DEFAULTS.write_text(json.dumps(request_defaults(), indent=1) + "\n")
