"""The client sends a request again when API Gateway or the API says it did not run, or
when it may be repeated; never a job submission that may have been recorded without a key
(pagefleet.client.retries). Answers come from a transport the test scripts; no network."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from pagefleet.client import ApiError, PagefleetClient, Retries
from pagefleet.client.retries import BACKOFF

API = "https://api.pagefleet.test"
JOB = {"steps": [{"action": "goto", "url": "https://example.test/"}]}
JOB_ID = "01jobjobjobjobjobjobjobjob"
VIEW = {
    "job_id": JOB_ID,
    "tenant_id": "t",
    "status": "queued",
    "created_at": "2026-12-07T00:00:00.000Z",
    "updated_at": "2026-12-07T00:00:00.000Z",
    "request": JOB,
}

Answer = httpx.Response | Exception


class Scripted:
    """Answers each request with the next of ``answers``; records what was sent and slept."""

    def __init__(self, *answers: Answer) -> None:
        self._answers: Iterator[Answer] = iter(answers)
        self.sent: list[httpx.Request] = []
        self.slept: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        answer = next(self._answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def client(self, attempts: int = 3) -> PagefleetClient:
        retries = Retries(attempts=attempts, sleep=self.slept.append)
        return PagefleetClient(API, "key", transport=httpx.MockTransport(self), retries=retries)


def refused(status: int, retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(status, json={"message": "try again"}, headers=headers)


def accepted() -> httpx.Response:
    return httpx.Response(202, json={"job_id": JOB_ID, "status": "queued", "job": VIEW})


def got() -> httpx.Response:
    return httpx.Response(200, json=VIEW)


def test_a_read_is_sent_again_after_a_gateway_timeout_and_a_busy_table() -> None:
    script = Scripted(refused(504), refused(503, "1"), got())
    job = script.client().get(JOB_ID)
    assert job.job_id == JOB_ID
    assert len(script.sent) == 3
    assert 0 <= script.slept[0] <= BACKOFF.ceiling(1) and script.slept[1] == 1.0


def test_a_keyed_submission_is_sent_again_with_the_same_key() -> None:
    script = Scripted(refused(502), refused(504), accepted())
    job = script.client().submit(JOB, idempotency_key="order-7")
    assert job.job_id == JOB_ID
    assert [r.headers["Idempotency-Key"] for r in script.sent] == ["order-7"] * 3
    assert [r.content for r in script.sent] == [script.sent[0].content] * 3


def test_a_submission_without_a_key_is_not_sent_again_once_it_may_have_run() -> None:
    """A 502/503/504 may come after the job was recorded: a second send would make two."""
    for status in (502, 503, 504):
        script = Scripted(refused(status, "1"))
        with pytest.raises(ApiError) as raised:
            script.client().submit(JOB)
        assert raised.value.status == status and len(script.sent) == 1


def test_a_throttled_submission_ran_nothing_and_is_sent_again_after_retry_after() -> None:
    script = Scripted(refused(429, "2"), accepted())
    assert script.client().submit(JOB).job_id == JOB_ID
    assert len(script.sent) == 2 and script.slept == [2.0]


def test_a_wait_longer_than_the_client_takes_is_left_to_the_caller() -> None:
    script = Scripted(refused(429, "20"))  # a tenant over its rate is told tens of seconds
    with pytest.raises(ApiError) as raised:
        script.client().submit(JOB)
    assert raised.value.retry_after == 20.0 and len(script.sent) == 1 and script.slept == []


def test_the_last_answer_is_raised_when_every_send_is_refused() -> None:
    script = Scripted(refused(503, "1"), refused(503, "1"), refused(503, "1"))
    with pytest.raises(ApiError) as raised:
        script.client().get(JOB_ID)
    assert raised.value.status == 503 and len(script.sent) == 3 and len(script.slept) == 2


@pytest.mark.parametrize(
    ("error", "call", "sends"),
    [
        # Never sent: safe for any request.
        (httpx.ConnectError("refused"), lambda c: c.submit(JOB), 2),
        # Sent, the answer lost: only a request that may run twice goes again.
        (httpx.ReadTimeout("slow"), lambda c: c.submit(JOB), 1),
        (httpx.ReadTimeout("slow"), lambda c: c.get(JOB_ID), 2),
        (httpx.RemoteProtocolError("closed"), lambda c: c.submit(JOB, idempotency_key="k"), 2),
        # What fails the same way every time is not sent again, safe or not.
        (httpx.UnsupportedProtocol("ftp"), lambda c: c.get(JOB_ID), 1),
        (httpx.LocalProtocolError("bad header"), lambda c: c.get(JOB_ID), 1),
    ],
)
def test_a_lost_connection_is_tried_again_only_where_it_is_safe(
    error: Exception, call: Callable[[PagefleetClient], object], sends: int
) -> None:
    script = Scripted(error, accepted() if sends == 2 else got(), got())
    if sends == 1:
        with pytest.raises(type(error)):
            call(script.client())
    else:
        call(script.client())
    assert len(script.sent) == sends


def test_a_session_step_is_sent_again_with_its_command_id() -> None:
    answer = {"session_id": "s1", "command_id": "c1", "status": "ready", "ok": True, "ran": 1}
    script = Scripted(refused(503, "1"), httpx.Response(200, json=answer))
    sent = script.client().send_steps("01sessionsessionsessionses", {"action": "reload"})
    assert len(script.sent) == 2
    assert script.sent[0].content == script.sent[1].content  # the same command_id
    assert b'"command_id"' in script.sent[0].content
    assert sent.command_id == "c1"


def test_one_attempt_never_sends_again() -> None:
    script = Scripted(refused(503, "1"))
    with pytest.raises(ApiError):
        script.client(attempts=1).get(JOB_ID)
    assert len(script.sent) == 1
    with pytest.raises(ValueError, match="at least once"):
        Retries(attempts=0)
