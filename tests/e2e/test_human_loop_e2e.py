"""A workflow job that asks for a person, on the shared local stack in real Chromium against
the demo site on 127.0.0.1, as its owner meets it:

- its ``job.waiting_for_human`` webhook and its ``Job Waiting For Human`` event carry the
  console link; a person opens it signed out, signs in, and lands on the job's live view
  holding the page (the link's takeover); they click the code field on the frame and type,
  press the console's "Continue the job" while still holding it: the job resumes but its
  next step does not start (a run event says who holds the page); they hand back, and the
  next step, in the same browser, reads what they typed;
- ``pagefleet continue`` (the CLI against the stack) resumes another job at its next step,
  with the page as the job left it and the person's note kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from typer.testing import CliRunner

from devstack.chaos import wait_until
from devstack.console_browser import console_browser
from devstack.provision import queue_arn
from devstack.stack import LocalStack
from devstack.strict_aws import await_settled
from pagefleet.cli import app
from pagefleet.client import ApiError, Job, PagefleetClient
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from tests.support.receiver import webhook_receiver

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROMPT = "Type the code we sent to your phone, then continue"
# examples/site/code.html: the field at (40, 120), 400 x 40 CSS pixels, in a job's default
# 1280 x 800 viewport: its centre is (240, 140).
VIEWPORT = (1280, 800)
FIELD_CENTRE = (240, 140)
TYPED = "417 902"
READ_STEP = 3  # the extract after the await_human step


@pytest.fixture(scope="module")
def waiting_events(stack: LocalStack) -> Iterator[str]:
    """A queue that gets the stack's ``Job Waiting For Human`` events (a rule on its bus)."""
    sqs, events = RUNTIME.client("sqs"), RUNTIME.client("events")
    url = sqs.create_queue(QueueName="e2e-waiting-for-human")["QueueUrl"]
    events.put_rule(
        Name="e2e-waiting-for-human",
        EventPattern=json.dumps(
            {"source": ["pagefleet"], "detail-type": ["Job Waiting For Human"]}
        ),
    )
    targets = [{"Id": "q", "Arn": queue_arn(sqs, url)}]
    events.put_targets(Rule="e2e-waiting-for-human", Targets=targets)
    # AWS: a queue is usable one second after it is made; its receives wait for that.
    assert await_settled(sqs, [url], timeout_s=10)
    yield str(url)
    events.remove_targets(Rule="e2e-waiting-for-human", Ids=["q"])
    events.delete_rule(Name="e2e-waiting-for-human")
    sqs.delete_queue(QueueUrl=url)


def _event_for(url: str, job_id: str) -> dict[str, Any] | None:
    for message in (
        RUNTIME.client("sqs")
        .receive_message(QueueUrl=url, WaitTimeSeconds=1, MaxNumberOfMessages=10)
        .get("Messages", [])
    ):
        event = json.loads(message["Body"])
        if event["detail"]["job_id"] == job_id:
            return dict(event["detail"])
    return None


def _job(stack: LocalStack, **extra: Any) -> dict[str, Any]:
    return {
        "name": "needs-a-code",
        "steps": [
            {"action": "goto", "url": f"{stack.site_url}/code.html"},
            {"action": "fill", "selector": "#code", "value": "left by the job"},
            {"action": "await_human", "prompt": PROMPT, "timeout_s": 600},
            {"action": "extract", "name": "code", "selector": "#code", "kind": "value"},
        ],
        "max_attempts": 1,
        **extra,
    }


def _status(client: PagefleetClient, job_id: str, status: JobStatus) -> Job:
    def reached() -> Job | None:
        job = client.get(job_id)
        assert not job.is_final or status is job.status, job.error
        return job if job.status is status else None

    found: Job = wait_until(reached, 180, poll=0.3, what=status.value)
    return found


def test_the_link_opens_the_live_view_held_and_the_next_step_waits_for_the_hand_back(
    stack: LocalStack, client: PagefleetClient, waiting_events: str
) -> None:
    assert stack.dev_api_key is not None
    with webhook_receiver() as hooks:
        notify = {"webhook": hooks.url, "on": ["waiting_for_human"]}
        job_id = client.submit(_job(stack, notify=notify)).job_id
        (hook,) = hooks.wait_for(1, timeout=180)
    body = json.loads(hook.body)
    link = f"{stack.console_url}#/jobs/{job_id}?live=1&takeover=1"
    assert (body["event"], body["status"], body["console_url"]) == (
        "job.waiting_for_human",
        "waiting_for_human",
        link,
    )
    assert body["human"]["prompt"] == PROMPT
    detail = wait_until(lambda: _event_for(waiting_events, job_id), 60, what="the event")
    assert detail["console_url"] == link and PROMPT not in json.dumps(detail)

    with console_browser() as browser:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(60_000)
        page.goto(link)  # signed out: the sign-in form, then on to the link
        page.get_by_label("API key").fill(stack.dev_api_key)
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#human-prompt")).to_have_text(PROMPT, timeout=60_000)
        frame = page.locator("#live-frame")
        expect(frame).to_have_attribute("data-seq", re.compile(r"\d+"), timeout=60_000)
        state = page.locator("#takeover-state")
        expect(state).to_contain_text("You hold the page", timeout=60_000)
        held = client.get(job_id).takeover
        assert held is not None
        shown = frame.evaluate("i => [i.clientWidth, i.clientHeight]")
        x, y = (FIELD_CENTRE[k] * shown[k] / VIEWPORT[k] for k in (0, 1))
        frame.click(position={"x": x, "y": y}, click_count=3)  # selects what the job left
        page.keyboard.type(TYPED)

        page.get_by_role("button", name="Continue the job").click()
        _status(client, job_id, JobStatus.RUNNING)

        def told_it_waits() -> bool:
            return any(
                e.type == "log" and f"step {READ_STEP} waits: {held.holder}" in (e.message or "")
                for e in client.events(job_id).events
            )

        wait_until(told_it_waits, 60, what="the run event saying the next step waits")
        started = [e.index for e in client.events(job_id).events if e.type == "step_started"]
        assert READ_STEP not in started and client.get(job_id).status is JobStatus.RUNNING
        page.get_by_role("button", name="Hand back").click()
        expect(state).to_contain_text("Handed back", timeout=60_000)

    done = client.wait(job_id, timeout=180)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"code": TYPED} and done.attempt == 1  # the same page, typed over
    events = client.events(job_id).events
    states = [e.status for e in events if e.type == "state"]
    assert states[:3] == ["running", "waiting_for_human", "running"], states
    assert [e.state for e in events if e.type == "takeover"] == ["taken", "handed_back"]


def test_pagefleet_continue_resumes_the_job_at_its_next_step_in_the_same_page(
    stack: LocalStack, client: PagefleetClient
) -> None:
    job_id = client.submit(_job(stack)).job_id
    _status(client, job_id, JobStatus.WAITING_FOR_HUMAN)
    env = {"PAGEFLEET_API_URL": stack.api_url, "PAGEFLEET_API_KEY": stack.dev_api_key or ""}
    answered = CliRunner().invoke(
        app, ["continue", job_id, "--note", "read it out", "--json"], env=env
    )
    assert answered.exit_code == 0, answered.output
    shown = json.loads(answered.output)
    assert shown["job_id"] == job_id and shown["human"]["note"] == "read it out"
    done = client.wait(job_id, timeout=180)
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"code": "left by the job"} and done.attempt == 1
    again = CliRunner().invoke(app, ["continue", job_id], env=env)
    refused = again.exception  # main() prints it as "API refused the request (409 ...)"
    assert isinstance(refused, ApiError) and refused.status == 409, again.output
    assert "succeeded" in refused.message  # it no longer waits
