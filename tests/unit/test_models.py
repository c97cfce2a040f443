from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from pagefleet.adapters.dynamodb import CursorCodec
from pagefleet.adapters.dynamodb.codec import (
    idempotency_sk,
    item_to_record,
    job_sk,
    record_to_item,
    status_pk,
    tenant_pk,
)
from pagefleet.adapters.s3 import artifact_key
from pagefleet.errors import InvalidRequest
from pagefleet.jobs.models import JobRequest, new_job_id
from pagefleet.jobs.options import JobOptions, Viewport
from pagefleet.jobs.ports import JobFilter
from pagefleet.jobs.record import AttemptRecord, JobRecord
from pagefleet.jobs.states import JobStatus
from pagefleet.specs.stored import STORED
from pagefleet.workflow.masking import mask_secrets
from pagefleet.workflow.templating import references, render

# A job item's sort key as the store writes it (a cursor names the last one read).
SK = "JOB#01jt8k3m5n7p9q2r4s6v8w0x1y"
STEPS = [
    {"action": "goto", "url": "{{inputs.site}}/a"},
    {"action": "fill", "selector": "#pw", "value": "{{secrets.PASSWORD}}"},
    {"action": "extract", "name": "items", "selector": "li", "many": True},
    {"action": "screenshot", "name": "shot.png", "full_page": True},
]


def test_request_parses_each_step_kind() -> None:
    request = JobRequest.model_validate({"steps": STEPS, "inputs": {"site": "http://x"}})
    assert [s.action for s in request.steps] == ["goto", "fill", "extract", "screenshot"]
    assert request.pool == "standard"
    assert request.max_attempts == 3


def test_a_request_without_options_gets_the_default_options() -> None:
    # The defaults are built without validation (model_construct, for the cold start).
    request = JobRequest.model_validate({"steps": STEPS[:1], "inputs": {"site": "http://x"}})
    assert request.options == JobOptions() == JobOptions.model_validate({})
    assert request.options.viewport == Viewport(width=1280, height=800)
    assert request.model_dump(mode="json")["options"] == JobOptions().model_dump(mode="json")
    assert request.model_dump(exclude_unset=True).keys() == {"inputs", "steps"}


def test_unknown_input_reference_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"inputs has no 'site'"):
        JobRequest.model_validate({"steps": STEPS})


def test_extract_attribute_requires_kind_attribute() -> None:
    with pytest.raises(ValidationError, match="attribute is required"):
        JobRequest.model_validate(
            {"steps": [{"action": "extract", "name": "x", "selector": "a", "kind": "attribute"}]}
        )


def test_wait_for_needs_exactly_one_target() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        JobRequest.model_validate({"steps": [{"action": "wait_for"}]})
    with pytest.raises(ValidationError, match="exactly one"):
        JobRequest.model_validate(
            {"steps": [{"action": "wait_for", "selector": "a", "url": "**/b"}]}
        )


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b.png", "", ".hidden"])
def test_artifact_names_cannot_escape_their_prefix(name: str) -> None:
    with pytest.raises(ValidationError):
        JobRequest.model_validate({"steps": [{"action": "screenshot", "name": name}]})


def test_fingerprint_ignores_key_order_but_not_content() -> None:
    a = JobRequest.model_validate({"steps": STEPS[2:], "max_attempts": 2})
    b = JobRequest.model_validate({"max_attempts": 2, "steps": STEPS[2:]})
    c = JobRequest.model_validate({"steps": STEPS[2:], "max_attempts": 3})
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_job_ids_sort_by_creation() -> None:
    ids = [new_job_id() for _ in range(50)]
    assert ids == sorted(ids)


def test_keys_start_with_the_tenant() -> None:
    assert tenant_pk("acme") == "TENANT#acme"
    assert job_sk("01abc") == "JOB#01abc"
    assert status_pk("acme", JobStatus.QUEUED) == "acme#queued"
    assert artifact_key("acme", "01abc", 2, "shot.png") == "acme/01abc/2/shot.png"
    assert idempotency_sk("k").startswith("IDEM#")
    assert len(idempotency_sk("x" * 999)) == 69


def test_record_round_trips_through_a_dynamodb_item() -> None:
    request = JobRequest.model_validate({"steps": STEPS, "inputs": {"site": "http://x"}})
    record = JobRecord(
        tenant_id="acme",
        job_id=new_job_id(),
        status=JobStatus.RUNNING,
        request=request,
        created_at="2026-11-30T06:00:00.000Z",
        updated_at="2026-11-30T06:00:00.000Z",
        correlation_id="c1",
        pool="standard",
        attempt=2,
        result={"price": 1.5, "names": ["a", "b"]},
        attempts=[AttemptRecord(attempt=1, worker="w", started_at="2026-11-30T06:00:00.000Z")],
    )
    from boto3.dynamodb.types import TypeSerializer

    ser = TypeSerializer()
    item = {k: ser.serialize(v) for k, v in record_to_item(record).items() if v is not None}
    assert item["pk"] == {"S": "TENANT#acme"}
    assert item["status_pk"] == {"S": "acme#running"}
    assert item_to_record(item) == record


def test_cursor_is_bound_to_its_tenant_and_listing() -> None:
    codec = CursorCodec()
    cursor = codec.encode("acme", {"pk": "TENANT#acme", "sk": SK})
    assert codec.decode("acme", cursor) == {"pk": "TENANT#acme", "sk": SK}
    by_status = codec.encode("acme", {"pk": "TENANT#acme", "sk": SK, "status_pk": "acme#queued"})
    assert codec.decode("acme", by_status, status=JobStatus.QUEUED)["status_pk"] == "acme#queued"
    refused = [
        ("other", cursor, None),  # another tenant's
        ("acme", by_status, None),  # a status listing's cursor in the unfiltered listing
        ("acme", cursor, JobStatus.QUEUED),  # and the other way round
        ("acme", by_status, JobStatus.RUNNING),  # another status's
        (
            "acme",
            codec.encode("x", {"pk": "TENANT#acme", "sk": SK, "status_pk": "o#queued"}),
            JobStatus.QUEUED,
        ),
        ("acme", codec.encode("acme", {"pk": "TENANT#acme", "evil": "1"}), None),
        ("acme", codec.encode("acme", {"sk": "JOB#zzz"}), None),  # partial keys
        ("acme", codec.encode("acme", {"sk": "JOB#zzz"}), JobStatus.QUEUED),
        ("acme", codec.encode("acme", {"pk": "TENANT#acme"}), None),
        ("acme", codec.encode("acme", {"pk": "TENANT#acme"}), JobStatus.QUEUED),
        ("acme", codec.encode("acme", {"pk": "TENANT#acme", "sk": "IDEM#abc"}), None),
        ("acme", codec.encode("acme", {"pk": "TENANT#acme", "sk": 7}), None),
        ("acme", "%%%not-base64", None),
        ("acme", "WzEsMl0", None),  # [1,2]
    ]
    for tenant, forged, status in refused:
        with pytest.raises(InvalidRequest) as caught:
            codec.decode(tenant, forged, status=status)
        assert caught.value.field == "cursor"


def test_templating_renders_inputs_and_masks_secrets() -> None:
    step = {"url": "{{ inputs.site }}/login", "value": "{{secrets.PW}}"}
    assert sorted(references(step)) == [("inputs", "site"), ("secrets", "PW")]
    rendered = render(step, {"site": "http://h"}, {"PW": "hunter2"})
    assert rendered == {"url": "http://h/login", "value": "hunter2"}
    assert mask_secrets(f"typed {rendered['value']} into #pw", ["hunter2"]) == "typed *** into #pw"
    with pytest.raises(KeyError, match=r"secrets\.PW"):
        render(step, {"site": "x"}, {})


def test_cursor_is_bound_to_the_listing_filters() -> None:
    codec = CursorCodec()
    key = {"pk": "TENANT#acme", "sk": SK, "status_pk": "acme#queued"}
    shop = JobFilter(workflow="shop")
    cursor = codec.encode("acme", key, where=shop)
    assert codec.decode("acme", cursor, status=JobStatus.QUEUED, where=shop) == key
    for status, where in [
        (JobStatus.QUEUED, JobFilter()),  # the filter dropped
        (JobStatus.QUEUED, JobFilter(workflow="other")),
        (JobStatus.QUEUED, JobFilter(workflow="shop", name="n")),  # one added
        (JobStatus.RUNNING, shop),
    ]:
        with pytest.raises(InvalidRequest) as caught:
            codec.decode("acme", cursor, status=status, where=where)
        assert caught.value.field == "cursor"
    plain = codec.encode("acme", key)
    with pytest.raises(InvalidRequest):
        codec.decode("acme", plain, status=JobStatus.QUEUED, where=shop)


@pytest.mark.parametrize(
    ("url", "inputs", "reason"),
    [
        ("file:///etc/passwd", {}, "http:// or https://"),
        ("about:blank", {}, "http:// or https://"),
        ("example.com/a", {}, "http:// or https://"),
        ("{{inputs.site}}/a", {"site": "ftp://files.example"}, "http:// or https://"),
        ("http:///a", {}, "has no host"),
        ("http://example.com:99999/", {}, "Port out of range"),
    ],
)
def test_a_goto_no_browser_may_open_is_refused_when_the_job_is_made(
    url: str, inputs: dict[str, str], reason: str
) -> None:
    steps = [{"action": "goto", "url": "https://example.com/"}, {"action": "goto", "url": url}]
    with pytest.raises(ValidationError, match="steps\\[1\\] cannot go to its url") as refused:
        JobRequest.model_validate({"steps": steps, "inputs": inputs})
    assert reason in str(refused.value)


def test_a_goto_checked_in_blocks_and_compensation_but_not_through_a_secret() -> None:
    nested = {
        "action": "paginate",
        "next": "a.next",
        "steps": [{"action": "goto", "url": "javascript:alert(1)"}],
    }
    with pytest.raises(ValidationError, match=re.escape("steps[0.steps[0]] cannot go")):
        JobRequest.model_validate({"steps": [nested]})
    with pytest.raises(ValidationError, match="compensate\\[0\\] cannot go"):
        JobRequest.model_validate(
            {
                "steps": [
                    {"action": "goto", "url": "https://example.com/"},
                    {"action": "click", "selector": "#place", "irreversible": True},
                ],
                "compensate": [{"action": "goto", "url": "data:text/html,x"}],
            }
        )
    # Known only in the worker, which refuses it there (tests/worker/test_worker_e2e.py).
    secret = JobRequest.model_validate({"steps": [{"action": "goto", "url": "{{secrets.URL}}"}]})
    assert secret.steps[0].model_dump()["url"] == "{{secrets.URL}}"


def test_a_record_with_a_goto_refused_since_is_read_as_written() -> None:
    request = JobRequest.model_validate(
        {"steps": [{"action": "goto", "url": "about:blank"}]}, context=STORED
    )
    record = JobRecord.model_validate(
        {
            "tenant_id": "acme",
            "job_id": new_job_id(),
            "status": JobStatus.FAILED,
            "request": request,
            "created_at": "2026-11-30T06:00:00.000Z",
            "updated_at": "2026-11-30T06:00:00.000Z",
            "correlation_id": "c1",
            "pool": "standard",
        },
        context=STORED,
    )
    from boto3.dynamodb.types import TypeSerializer

    ser = TypeSerializer()
    item = {k: ser.serialize(v) for k, v in record_to_item(record).items() if v is not None}
    assert item_to_record(item) == record
