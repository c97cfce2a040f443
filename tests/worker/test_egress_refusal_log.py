"""Every egress refusal is one structured line of the worker's log, with the job's keys, and
a metric (issue 23): a goto refused by the job's checks, a job's proxy on a forbidden
address, a page's own request refused by the worker's egress proxy. Real Chromium and a
worker against moto; the forbidden names resolve through a stub to a private address and
the proxy's connector dials loopback only, so nothing ever leaves the machine."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest

from browser_task.__main__ import build_worker
from browser_task.observe.telemetry import logger as worker_logger
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import JobStatus
from pagefleet.specs import metrics_names
from pagefleet.specs.settings import WorkerSettings
from tests.worker.conftest import TENANT, RunningWorker, Site, submit, wait_for_job
from tests.worker.test_correlation import Lines
from tests.worker.test_ssrf import LoopbackOnlyConnector

FORBIDDEN = {"goto.test", "proxy.test", "inpage.test"}  # all resolve to 10.0.0.1


async def stub_resolver(host: str) -> list[str]:
    if host in FORBIDDEN:
        return ["10.0.0.1"]
    raise OSError(-2, "not in the test's table (no real DNS here)")


def emf_total(text: str, name: str) -> float:
    total = 0.0
    for raw in text.splitlines():
        if raw.startswith("{") and '"_aws"' in raw and name in raw:
            value = json.loads(raw)[name]
            total += sum(value) if isinstance(value, list) else value
    return total


def test_each_refusal_is_one_line_with_the_jobs_keys_and_a_metric(
    make_settings: Callable[..., WorkerSettings],
    services: JobServices,
    site: Site,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fetcher = site.add(
        "/fetcher.html",
        "<h1>page</h1><script>"
        f"fetch('http://inpage.test:{site.base_url.rsplit(':', 1)[1]}/secret')"
        ".catch(() => null).then(() => document.body.insertAdjacentHTML('beforeend',"
        " '<p id=done>done</p>'))</script>",
    )
    jobs = {
        "goto": {"steps": [{"action": "goto", "url": "http://goto.test:8080/x"}]},
        "proxy": {
            "steps": [{"action": "goto", "url": fetcher}],
            "options": {"proxy": {"server": "http://proxy.test:3128"}},
        },
        "inpage": {
            "steps": [
                {"action": "goto", "url": fetcher},
                {"action": "wait_for", "selector": "#done"},
            ]
        },
    }
    lines = Lines(worker_logger)
    worker_logger.addHandler(lines)
    level = worker_logger.log_level
    worker_logger.setLevel(logging.INFO)
    settings = make_settings(concurrency=2)
    connector = LoopbackOnlyConnector()  # a broken policy still reaches nothing
    worker = build_worker(settings, resolver=stub_resolver, connect=connector)
    try:
        ids = {name: submit(services, body).job_id for name, body in jobs.items()}
        running = RunningWorker(worker).start()
        done = {name: wait_for_job(services, job_id) for name, job_id in ids.items()}
        running.stop()  # every line is logged and the metrics flushed once it has stopped
    finally:
        worker_logger.removeHandler(lines)
        worker_logger.setLevel(level)

    assert done["goto"].error is not None and done["goto"].error.kind == "egress_refused"
    assert done["proxy"].error is not None and done["proxy"].error.kind == "egress_refused"
    assert done["inpage"].status is JobStatus.SUCCEEDED, done["inpage"].error
    refusals = [line for line in lines.lines if line["message"] == "egress refused"]
    by_job = {name: [r for r in refusals if r.get("job_id") == ids[name]] for name in ids}
    assert all(len(found) == 1 for found in by_job.values()), refusals
    assert len(refusals) == 3, refusals
    expected = {
        "goto": ("goto.test", 8080, "policy"),
        "proxy": ("proxy.test", 3128, "policy"),
        "inpage": ("inpage.test", int(site.base_url.rsplit(":", 1)[1]), "policy"),
    }
    for name, [line] in by_job.items():
        assert (line["host"], line["port"], line["kind"]) == expected[name], line
        assert "10.0.0.1 is a private address" in line["reason"], line
        assert line["tenant_id"] == TENANT
        assert line["correlation_id"] == done[name].correlation_id
        assert line["level"] == "WARNING" and line["timestamp"]
    assert connector.dialled == [] or all(h == "127.0.0.1" for h, _ in connector.dialled)
    assert emf_total(capsys.readouterr().out, metrics_names.EGRESS_REFUSALS) == 3
