"""What a job's message carries for its worker before the claim (pagefleet.jobs.preview):
enough to admit and open the job early, nothing of its workflow, and never a reason for the
message to stop being a job's."""

from __future__ import annotations

import json
from typing import Any

from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.preview import PREVIEW_MAX_BYTES, carried
from pagefleet.jobs.record import JobMessage, JobRecord
from pagefleet.jobs.states import JobStatus
from tests.support.records import job_record


def record(**fields: Any) -> JobRecord:
    """A queued job ``j1`` whose URL names an input and whose steps a secret."""
    request = JobRequest.model_validate(
        {
            "steps": [
                {"action": "goto", "url": "https://Shop.Test/orders/{{inputs.order}}?q=1"},
                {"action": "fill", "selector": "#pw", "value": "{{secrets.PW}}"},
            ],
            "inputs": {"order": "order-4711"},
            **fields,
        }
    )
    return job_record(status=JobStatus.QUEUED, request=request)


def sent(job: JobRecord) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(JobMessage.for_job(job, preview=True).body())
    return body


def test_a_preview_names_the_origin_and_the_options_and_nothing_of_the_workflow() -> None:
    body = sent(record(options={"locale": "de-DE"}))
    assert body["preview"] == {
        "origin": "https://shop.test:443",
        "options": {"locale": "de-DE"},
        "secrets": True,
    }
    text = json.dumps(body)
    for private in ("order-4711", "/orders/", "q=1", "#pw", "PW", "steps", "inputs"):
        assert private not in text
    parsed = JobMessage.model_validate_json(json.dumps(body))
    assert parsed.preview is not None and parsed.preview.attempt == 1
    assert (
        parsed.preview
        == JobMessage.for_job(record(options={"locale": "de-DE"}), preview=True).preview
    )


def test_a_job_with_headers_or_a_context_of_its_own_carries_less() -> None:
    # A header may hold a literal token: no preview at all, the worker reads the record.
    assert "preview" not in sent(record(options={"extra_headers": {"X-Key": "literal"}}))
    # A job that opens its context after the claim carries its origin only.
    proxied = sent(record(options={"proxy": {"server": "http://proxy.example:3128"}}))
    assert proxied["preview"] == {"origin": "https://shop.test:443", "secrets": True}
    assert "proxy.example" not in json.dumps(proxied)
    # A retry's message previews the next attempt of the budget (its trace plan).
    retried = record().model_copy(update={"attempt": 1, "events_seq": 32})
    assert sent(retried)["preview"]["attempt"] == 2
    # A record numbering its events elsewhere (claimed by a version before the counter).
    older = retried.model_copy(update={"events_seq": 0})
    assert "preview" not in sent(older)


def test_a_preview_too_big_is_left_out() -> None:
    urls = [f"https://ads{i}.example/{'x' * 100}/**" for i in range(50)]
    job = record(options={"block": {"urls": urls}})
    assert len(json.dumps(urls)) > PREVIEW_MAX_BYTES
    assert carried(job.preview(), job.request) is None
    assert "preview" not in sent(job)
    # One a little smaller is carried whole.
    small = record(options={"block": {"urls": urls[:5]}})
    assert sent(small)["preview"]["options"] == {"block": {"urls": urls[:5]}}


def test_a_preview_this_version_cannot_read_leaves_a_job_message() -> None:
    # During a rollout a newer API may add an option this worker does not know.
    body = sent(record(options={"locale": "de-DE"}))
    body["preview"]["options"]["an_option_from_a_newer_version"] = True
    parsed = JobMessage.model_validate_json(json.dumps(body))
    assert parsed.job_id == "j1" and parsed.preview is None
