"""The job queue: what the lifecycle relies on from SQS, on the fake and on SQS itself."""

from __future__ import annotations

from collections.abc import Callable

from pagefleet.jobs.record import JobMessage
from pagefleet.jobs.service import JobServices

MESSAGE = JobMessage(tenant_id="t", job_id="j1", attempt=0, correlation_id="c-1", pool="standard")


def _receive(svc: JobServices, visibility: int = 30):
    return svc.queue.receive("standard", max_messages=1, wait_seconds=0, visibility=visibility)


def test_a_message_is_delivered_with_its_ids_and_receive_count(svc: JobServices) -> None:
    svc.queue.send(MESSAGE)
    [received] = _receive(svc)
    assert received.message == MESSAGE
    assert received.receive_count == 1
    assert received.sent_at_ms > 0 and received.receipt_handle


def test_a_received_message_is_hidden_until_handed_back(svc: JobServices) -> None:
    svc.queue.send(MESSAGE)
    [first] = _receive(svc)
    assert _receive(svc) == []
    svc.queue.change_visibility("standard", first.receipt_handle, 0)
    [again] = _receive(svc)
    assert again.message == MESSAGE and again.receive_count == 2
    svc.queue.delete("standard", again.receipt_handle)
    assert _receive(svc) == []


def test_visibility_runs_out_and_delays_hold_messages_back(
    svc: JobServices, wait: Callable[[float], None]
) -> None:
    svc.queue.send(MESSAGE, delay_seconds=1)
    assert _receive(svc) == []
    wait(1.5)
    [received] = _receive(svc, visibility=1)
    assert _receive(svc) == []
    wait(1.5)
    [back] = _receive(svc)
    assert back.message == MESSAGE and back.receive_count == 2
    assert received.message_id == back.message_id


def test_a_batch_delete_takes_any_number_of_messages_for_good(
    svc: JobServices, wait: Callable[[float], None]
) -> None:
    messages = [MESSAGE.model_copy(update={"job_id": f"j{n}"}) for n in range(12)]
    for message in messages:
        svc.queue.send(message)
    received = []
    while len(received) < len(messages):
        got = svc.queue.receive("standard", max_messages=10, wait_seconds=0, visibility=1)
        assert got, f"only {len(received)} of {len(messages)} received"
        received += got
    # More than SQS takes in one request: the queue splits them.
    assert svc.queue.delete_batch("standard", [r.receipt_handle for r in received]) == []
    wait(1.5)  # past their visibility: a message not deleted would be back
    assert _receive(svc) == []
