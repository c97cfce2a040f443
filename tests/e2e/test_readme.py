"""Every CLI and curl example of the README and of the API reference (docs/api.md, where
the README's long reference went), run as printed against the local stack, in that order;
and every Python example of the SDK reference (docs/reference/sdk.md), run as printed.

Placeholders are filled the way a reader would: ``<demo site URL>`` with the stack's demo
site, ``<job id>`` / ``<id>`` with the job the previous examples made, and the exported
``PAGEFLEET_API_URL`` / ``PAGEFLEET_API_KEY`` with the stack's. Deploying (docs/deploy.md,
AWS) is checked by the infra suite and tests/unit/test_deploy_doc.py, not here.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from devstack.stack import LocalStack
from pagefleet.cli.common import EXIT_FAILED
from pagefleet.client import PagefleetClient

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB_ID = re.compile(r"\b[0-9a-z]{26}\b")
RUNNABLE = (".venv/bin/pagefleet ", "curl ")
DOCUMENTS = ("README.md", "docs/api.md")
# Commands whose output names the job they made: the next <job id> is that one.
MAKES_A_JOB = ("submit", '/v1/jobs"', "-X POST", "schedules run")


def _expected_exit(command: str) -> int:
    """0, or the CLI's exit code for a failed job where the example's comment says the run
    fails (the monitor whose shop lost its list: ``# failed: data_quality``)."""
    comment = command.partition("  # ")[2].strip()
    return EXIT_FAILED if comment.startswith("failed") else 0


def _closed(command: str) -> bool:
    """Whether the shell would read ``command`` as whole: every quote closed."""
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return False
    return True


def _runnable_lines(text: str) -> list[str]:
    """Lines of the bash blocks that start a runnable example."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line for b in blocks for line in b.splitlines() if line.startswith(RUNNABLE)]


def readme_commands() -> list[str]:
    """The runnable lines of the README's and the API reference's bash blocks, with
    continuation lines joined."""
    text = "\n".join((ROOT / name).read_text() for name in DOCUMENTS)
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        pending = ""
        for line in joined.splitlines():
            # A quoted argument may run over several lines (a JSON body): keep reading. A
            # comment's apostrophe ("the fleet view's figures") opens no quote.
            pending = f"{pending}\n{line}" if pending else line.strip()
            if not _closed(pending):
                continue
            if pending.startswith(RUNNABLE):
                commands.append(pending)
            pending = ""
    return commands


def test_the_readme_has_examples_to_run() -> None:
    commands = readme_commands()
    assert any(c.startswith("curl ") for c in commands)
    assert sum(c.startswith(".venv/bin/pagefleet ") for c in commands) >= 10
    readme = (ROOT / "README.md").read_text()
    assert "\n.venv/bin/pagefleet submit " in readme, "the README lost its quick start"
    # None is skipped, e.g. by a quote the reader of the line would not see as one.
    text = "\n".join((ROOT / name).read_text() for name in DOCUMENTS)
    assert len(commands) == len(_runnable_lines(text))


def test_every_readme_example_works_as_printed(stack: LocalStack) -> None:
    env = {
        **os.environ,
        "PAGEFLEET_API_URL": stack.api_url,
        "PAGEFLEET_API_KEY": stack.dev_api_key or "",
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    site = stack.site_url
    last_job: str | None = None
    last_schedule: str | None = None
    with PagefleetClient(stack.api_url, stack.dev_api_key) as client:
        for command in readme_commands():
            if " cancel " in f" {command} ":
                # Cancel needs a job that has not ended yet: a delayed one.
                waiting = client.submit(
                    {"delay_seconds": 600, "steps": [{"action": "goto", "url": f"{site}/"}]}
                )
                last_job = waiting.job_id
            filled = (
                command.replace("<demo site URL>", site)
                .replace("http://127.0.0.1:8081", site)
                .replace("<job id>", last_job or "<job id>")
                .replace("<id>", last_job or "<id>")
                .replace("<schedule id>", last_schedule or "<schedule id>")
            )
            done = subprocess.run(
                ["bash", "-c", filled],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
            )
            output = done.stdout + done.stderr
            assert done.returncode == _expected_exit(command), f"{filled}\n{output}"
            if command.startswith("curl "):
                answer = json.loads(done.stdout)
                # An error answer is {"error": {...}}; a job carries "error": null.
                assert not isinstance(answer.get("error"), dict), f"{filled}\n{output}"
                assert "message" not in answer, f"{filled}\n{output}"
            found = JOB_ID.findall(done.stdout)
            if found and "schedules create" in command:
                last_schedule = found[0]
            elif found and any(m in command for m in MAKES_A_JOB):
                last_job = found[0]


def sdk_examples() -> dict[str, str]:
    """The SDK page's examples, by their heading."""
    text = (ROOT / "docs" / "reference" / "sdk.md").read_text()
    return dict(re.findall(r"\n### (.+?)\n\n```python\n(.*?)```", text, flags=re.S))


# What each example prints when it worked (patterns): its job ended well, its refusal came.
SDK_PRINTS = {
    "Submit a job and wait for it": (r"succeeded", r"^409 "),
    "Follow a job as it runs": (r"^event \d+ ", r"^status \S*succeeded final"),
    "Submit a batch": (r"^2 accepted", r"^1 202 \w{26}$"),
    "Named workflows": (r'^-\s+"action": "extract"', r"Pagefleet demo shop"),
    # The run's job is the newest the schedule made.
    "Schedules": (r"^(\w{26})\n\1 ",),
    "A browser session, step by step": (
        r"^True http://\S+/contact.html",
        r"^True 2$",
        r"^contact-form ",
    ),
}


@pytest.mark.parametrize("title", sorted(SDK_PRINTS))
def test_every_sdk_example_works_as_printed(stack: LocalStack, title: str) -> None:
    assert set(sdk_examples()) == set(SDK_PRINTS)
    source = (
        sdk_examples()[title]
        .replace("http://127.0.0.1:8080", stack.api_url)
        .replace("pf_...", stack.dev_api_key or "")
        .replace("http://127.0.0.1:8081", stack.site_url)
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, f"sdk.md: {title}", "exec"), {})  # noqa: S102 (our own page)
    for expected in SDK_PRINTS[title]:
        assert re.search(expected, printed.getvalue(), re.M), (expected, printed.getvalue())


def test_every_script_the_readme_names_runs_as_printed() -> None:
    """`.venv/bin/python <script>` lines (the benches, the screenshots): each answers
    ``--help``, all in one process (their imports are shared)."""
    scripts = sorted(
        set(re.findall(r"\.venv/bin/python\s+([\w/]+\.py)", (ROOT / "README.md").read_text()))
    )
    assert len(scripts) >= 4
    program = (
        "import runpy, sys\n"
        "for script in sys.argv[1:]:\n"
        "    sys.argv = [script, '--help']\n"
        "    try:\n"
        "        runpy.run_path(script, run_name='__main__')\n"
        "    except SystemExit as done:\n"
        "        assert done.code in (0, None), script\n"
        "    else:\n"
        "        raise AssertionError(f'{script} --help did not exit')\n"
    )
    done = subprocess.run(
        [str(ROOT / ".venv/bin/python"), "-c", program, *scripts],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("usage:") == len(scripts), done.stdout
