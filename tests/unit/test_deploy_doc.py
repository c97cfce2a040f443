"""What docs/deploy.md tells an operator to run is real: every ``pagefleet`` command and
option it prints exists, every job it gives is one the API accepts, the first job targets
a host the deployed egress guard lets through, and the refusal it quotes for 127.0.0.1 is
the one a deployed worker gives. (The AWS CLI lines need an account: not checked here.)
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import typer

from browser_task.errors import refused_navigation
from pagefleet.cli import app
from pagefleet.jobs.models import JobRequest
from pagefleet.targets.egress_policy import EgressPolicy

DEPLOY = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def _text() -> str:
    return DEPLOY.read_text()


def _command_lines() -> list[str]:
    """Every ``.venv/bin/pagefleet ...`` line of the document's code blocks."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", _text(), flags=re.S)
    found = re.findall(r"\.venv/bin/pagefleet [^\n#|]*", "\n".join(blocks))
    return [line.strip() for line in found]


def _documented_jobs() -> list[dict[str, object]]:
    """The first job, and the jobs the verification steps write with ``echo '...' >``."""
    text = _text()
    first = re.search(r"<!-- first-job[^>]*-->\n```json\n(.*?)```", text, flags=re.S)
    assert first is not None, "docs/deploy.md lost its first job"
    echoed = re.findall(r"echo '(\{.*?\})' >", text, flags=re.S)
    return [json.loads(first.group(1)), *(json.loads(body) for body in echoed)]


def _resolve(argv: list[str]) -> tuple[Any, list[str]]:
    """The command a command line reaches, and the words left after it. (Duck-typed:
    typer may build its commands on its own copy of click.)"""
    command = typer.main.get_command(app)
    words = list(argv)
    while hasattr(command, "commands") and words and words[0] in command.commands:
        command = command.commands[words.pop(0)]
    return command, words


def test_every_pagefleet_command_of_the_guide_exists_with_its_options() -> None:
    lines = _command_lines()
    assert any("admin create-key" in line and "--admin" in line for line in lines)
    for line in lines:
        argv = shlex.split(line.replace("<job id>", "JOB").replace("<operator key>", "K"))[1:]
        command, rest = _resolve(argv)
        assert not hasattr(command, "commands"), f"{line}: no such command"
        options = {opt for param in command.params for opt in param.opts}
        for word in rest:
            if word.startswith("--"):
                assert word.split("=", 1)[0] in options, f"{line}: {command.name} has no {word}"


def test_every_job_of_the_guide_is_accepted() -> None:
    jobs = _documented_jobs()
    assert len(jobs) >= 4
    for job in jobs:
        JobRequest.model_validate(job)


def test_the_first_job_targets_a_public_host_the_deployed_guard_lets_through() -> None:
    first = _documented_jobs()[0]
    steps = first["steps"]
    assert isinstance(steps, list)
    urls = [step["url"] for step in steps if step["action"] == "goto"]
    assert urls
    for url in urls:
        parts = urlsplit(url)
        assert parts.scheme == "https"
        assert parts.hostname is not None
        # Judged on its face, as the worker does before any lookup; no lookup is made here.
        assert EgressPolicy.host_reason(parts.hostname) is None, url
        assert not parts.hostname.replace(".", "").isdigit(), "an address, not a public name"


def test_the_quoted_refusal_of_a_loopback_target_is_the_workers() -> None:
    reason = EgressPolicy(allow_loopback=False).address_reason("127.0.0.1")
    assert reason is not None, "the deployed guard lets loopback through"
    failure = refused_navigation("http://127.0.0.1:8081/", reason)
    assert not failure.retryable
    quoted = f'"error": {{"kind": "{failure.kind}", "message": "{failure.message}"}}'
    assert quoted in _text()
