"""Every Lambda entry point logs with the correlation id, emits EMF metrics, and sends
nothing anywhere when it runs off Lambda (no X-Ray daemon, no network at import)."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.provision import Provisioned
from pagefleet.runtime import RUNTIME
from pagefleet.specs import metrics_names
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import ApiCaller
from tests.support.sqs_events import sqs_event

JOB = {"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]}
HANDLERS = (
    "functions.api.handler",
    "functions.authorizer.handler",
    "functions.dead_letters.handler",
    "functions.sweeper.handler",
)


class Records(logging.Handler):
    """Log lines as the Powertools formatter of ``logger`` writes them (parsed JSON)."""

    def __init__(self, powertools_logger: Any) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(powertools_logger.registered_formatter)
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@contextlib.contextmanager
def recorded(powertools_logger: Any) -> Iterator[Records]:
    """Collect the logger's lines at INFO (whatever level it was created with)."""
    records, level = Records(powertools_logger), powertools_logger.log_level
    powertools_logger.addHandler(records)
    powertools_logger.setLevel(logging.INFO)
    try:
        yield records
    finally:
        powertools_logger.removeHandler(records)
        powertools_logger.setLevel(level)


@pytest.fixture
def api_logs() -> Iterator[Records]:
    from functions.api.context import logger

    with recorded(logger) as records:
        yield records


@pytest.fixture
def tenant(api_env: Provisioned) -> ApiCaller:
    return ApiCaller(create_api_key(RUNTIME.tenant_store(api_env.tenants_table), "acme")[0])


def test_api_log_record_carries_the_jobs_correlation_id(
    tenant: ApiCaller, api_logs: Records
) -> None:
    given = tenant.post_job(JOB, headers={"X-Correlation-Id": "trace-77"}).body
    assert given["job"]["correlation_id"] == "trace-77"
    [line] = [r for r in api_logs.lines if r["message"] == "job submitted"]
    assert line["correlation_id"] == "trace-77"
    assert line["job_id"] == given["job_id"]
    assert line["service"] == "pagefleet-api"
    assert {"level", "timestamp", "location"} <= set(line)

    # Without the header, the job and the log line share API Gateway's request id.
    api_logs.lines.clear()
    own = tenant.post_job(JOB).body
    [line] = [r for r in api_logs.lines if r["message"] == "job submitted"]
    assert line["correlation_id"] == own["job"]["correlation_id"]


def emf_blobs(text: str) -> list[dict[str, Any]]:
    out = []
    for raw in text.splitlines():
        if raw.startswith("{") and '"_aws"' in raw:
            out.append(json.loads(raw))
    return out


def test_dead_letters_handler_emits_jobs_dead_lettered_per_job(
    tenant: ApiCaller, capsys: pytest.CaptureFixture[str]
) -> None:
    from functions.dead_letters import handler as dl

    jobs = [tenant.post_job(JOB).body for _ in range(2)]
    ended = tenant.post_job(JOB).body
    tenant.call("POST", f"/v1/jobs/{ended['job_id']}/cancel")
    bodies = [
        json.dumps(
            {
                "tenant_id": "acme",
                "job_id": j["job_id"],
                "attempt": 1,
                "correlation_id": j["job"]["correlation_id"],
                "pool": "standard",
            }
        )
        for j in [*jobs, ended]
    ]
    capsys.readouterr()
    assert dl.handler(sqs_event(bodies), None) == {"batchItemFailures": []}
    blobs = [b for b in emf_blobs(capsys.readouterr().out) if metrics_names.DEAD_LETTERED in b]
    assert len(blobs) == 1  # one EMF line for the invocation
    [blob] = blobs
    [directive] = blob["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == metrics_names.NAMESPACE
    assert directive["Dimensions"] == [["service"]]
    assert blob["service"] == "pagefleet-dead-letters"
    # Two jobs marked; the cancelled one stays cancelled and is not counted.
    assert blob[metrics_names.DEAD_LETTERED] in (2, 2.0, [1.0, 1.0], [1, 1])


def test_sqs_correlation_id_is_injected_from_the_message_attribute(
    tenant: ApiCaller,
) -> None:
    from functions.dead_letters import handler as dl

    with recorded(dl.logger) as records:
        job = tenant.post_job(JOB, headers={"X-Correlation-Id": "dlq-trace"}).body
        body = json.dumps(
            {
                "tenant_id": "acme",
                "job_id": job["job_id"],
                "attempt": 1,
                "correlation_id": "dlq-trace",
                "pool": "standard",
            }
        )
        event = sqs_event([body])
        event["Records"][0]["messageAttributes"] = {
            "correlation_id": {"stringValue": "dlq-trace", "dataType": "String"}
        }
        dl.handler(event, None)
    [line] = [r for r in records.lines if r["message"] == "dead letter"]
    assert line["correlation_id"] == "dlq-trace"
    assert line["service"] == "pagefleet-dead-letters"


def test_tracing_is_off_outside_lambda() -> None:
    import importlib

    for name in HANDLERS:
        module = importlib.import_module(name)
        tracer = (
            getattr(module, "tracer", None)
            or importlib.import_module("functions.api.context").tracer
        )
        assert tracer.disabled, name


def test_importing_the_handlers_opens_no_connection() -> None:
    script = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise AssertionError(f'network at import: {a}')\n"
        "socket.socket.connect = refuse\n"
        "socket.socket.sendto = refuse\n"
        "socket.create_connection = refuse\n"
        f"for name in {HANDLERS!r}:\n"
        "    __import__(name)\n"
        "print('imported')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "imported" in done.stdout
