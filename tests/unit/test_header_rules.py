"""A job's extra headers and User-Agent are refused when made if Chromium would refuse them.

Before, such a job was accepted and then failed every attempt in the browser (measured with
Chromium 156: a name that is not a token or a value with CR/LF fails ``new_page``; ``Host``,
``Content-Length`` or any ``Proxy-`` header fails every request with
``net::ERR_INVALID_ARGUMENT``). A record written before the rules is still read as written.
"""

from __future__ import annotations

import asyncio

import pytest
from boto3.dynamodb.types import TypeSerializer
from pydantic import ValidationError

from browser_task.errors import FailJob
from browser_task.run.prepare import prepare_run
from devstack.fakes import FakeSecrets
from pagefleet.adapters.dynamodb.codec import item_to_record, record_to_item
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.options import JobOptions
from pagefleet.specs.stored import STORED
from pagefleet.workflow.headers import request_header_problem
from tests.support.records import job_record


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("X Trace", "1", "not a token"),
        ("", "1", "not a token"),
        ("X-Caf\u00e9", "1", "not a token"),
        ("{{inputs.name}}", "1", "not a token"),
        ("Host", "other.example", "refused by Chromium"),
        ("content-length", "10", "refused by Chromium"),
        ("Transfer-Encoding", "chunked", "refused by Chromium"),
        ("Connection", "close", "refused by Chromium"),
        ("Proxy-Authorization", "Basic eA==", "options.proxy"),
        ("X-Trace", "1\r\nX-Other: 2", "CR or LF"),
        ("X-Trace", "a\x00b", "NUL"),
    ],
)
def test_headers_chromium_refuses_are_refused_with_the_reason(
    name: str, value: str, reason: str
) -> None:
    with pytest.raises(ValidationError, match="extra_headers") as refused:
        JobOptions.model_validate({"extra_headers": {name: value}})
    assert reason in str(refused.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("Cookie", "a=1; b=2"),
        ("Authorization", "Bearer {{secrets.API_TOKEN}}"),
        ("Referer", "https://example.com/"),
        ("Sec-Fetch-Mode", "navigate"),
        ("X-Name", "caf\u00e9\tand a tab"),  # Chromium sends these (as UTF-8)
        ("Accept-Language", "de-DE"),
    ],
)
def test_headers_chromium_sends_are_kept(name: str, value: str) -> None:
    assert request_header_problem(name, value) is None
    options = JobOptions.model_validate({"extra_headers": {name: value}})
    assert options.extra_headers == {name: value}


def test_a_header_given_twice_in_two_cases_is_refused() -> None:
    with pytest.raises(ValidationError, match="given twice"):
        JobOptions.model_validate({"extra_headers": {"X-Trace": "1", "x-trace": "2"}})


def test_a_user_agent_that_would_end_its_header_is_refused() -> None:
    for agent in ("bot/1.0\r\nX-Other: 2", "bot\x00"):
        with pytest.raises(ValidationError, match="user_agent"):
            JobOptions.model_validate({"user_agent": agent})
    assert JobOptions.model_validate({"user_agent": "bot/1.0 (caf\u00e9)"}).user_agent


def test_a_record_written_before_the_rules_is_read_as_written() -> None:
    old = {"Host": "other.example", "X Trace": "1"}
    request = JobRequest.model_validate(
        {"steps": [{"action": "goto", "url": "http://x/"}], "options": {"extra_headers": old}},
        context=STORED,
    )
    record = job_record(request=request)
    serializer = TypeSerializer()
    item = {k: serializer.serialize(v) for k, v in record_to_item(record).items() if v is not None}
    assert item_to_record(item).request.options.extra_headers == old
    with pytest.raises(ValidationError):  # but a new job with them is refused
        JobOptions.model_validate({"extra_headers": old})


def test_a_secret_that_breaks_a_header_fails_the_job_and_names_no_secret() -> None:
    secret = "tok\r\nX-Injected: 1"
    request = JobRequest.model_validate(
        {
            "steps": [{"action": "goto", "url": "http://x/"}],
            "options": {"extra_headers": {"Authorization": "Bearer {{secrets.API_TOKEN}}"}},
        }
    )
    job = job_record(request=request)
    secrets = FakeSecrets({("t", "API_TOKEN"): secret})
    with pytest.raises(FailJob) as failed:
        asyncio.run(prepare_run(job, secrets=secrets, sessions=None, policies=None))
    assert failed.value.kind == "invalid_workflow"
    assert "CR or LF" in str(failed.value)
    assert "tok" not in str(failed.value) and "Injected" not in str(failed.value)


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"X Mock": "1"}, "not a token"),
        ({"X-Mock": "1\r\nX-Other: 2"}, "CR or LF"),
        ({"X-Mock": "1", "x-mock": "2"}, "given twice"),
    ],
)
def test_a_route_answers_only_with_headers_chromium_takes(
    headers: dict[str, str], reason: str
) -> None:
    # Chromium leaves a request fulfilled with such a header unanswered: the page waited
    # until its step timed out.
    route = {"action": "route", "url": "**/api/**", "fulfill": {"headers": headers}}
    with pytest.raises(ValidationError, match=r"fulfill\.headers") as refused:
        JobRequest.model_validate({"steps": [route, {"action": "goto", "url": "http://x/"}]})
    assert reason in str(refused.value)


def test_a_route_may_answer_with_headers_a_request_may_not_carry() -> None:
    headers = {"Set-Cookie": "a=1", "Content-Type": "text/html", "X-Name": "caf\u00e9"}
    route = {"action": "route", "url": "**/api/**", "fulfill": {"headers": headers}}
    request = JobRequest.model_validate({"steps": [route, {"action": "goto", "url": "http://x/"}]})
    assert request.steps[0].model_dump()["fulfill"]["headers"] == headers
