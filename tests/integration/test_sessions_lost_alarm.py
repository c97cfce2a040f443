"""The lost-sessions alarm hears of every session lost, whoever finds it (issue 32, finding
7): the API as the session is read, a worker's lease watch, the sweeper. Each counts
BrowserSessionsLost under the one service the alarm reads (EMF on stdout, as on Lambda and
Fargate). Before, only the API counted, and a worker or the sweeper taking the dead lease
back first left the alarm silent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from browser_task.observe.telemetry import JobLog, WorkerMetrics
from browser_task.slot.leases import LeaseWatch
from devstack.pollers import sweeper_timer
from devstack.provision import Provisioned
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.record import JobRecord
from pagefleet.runtime import RUNTIME
from pagefleet.specs import metrics_names
from pagefleet.tenancy.api_keys import create_api_key
from tests.support.api import ApiCaller

TENANT = "sessions-lost"


def lost_counts(out: str) -> list[tuple[str, float]]:
    """(service, value) of every BrowserSessionsLost datum in EMF lines printed."""
    counts = []
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        blob = json.loads(line)
        names = [
            metric["Name"]
            for directive in blob.get("_aws", {}).get("CloudWatchMetrics", [])
            for metric in directive["Metrics"]
        ]
        if metrics_names.SESSIONS_LOST in names:
            value = blob[metrics_names.SESSIONS_LOST]  # Powertools writes a list of values
            counts.append((blob["service"], sum(value) if isinstance(value, list) else value))
    return counts


@pytest.fixture
def owner(api_env: Provisioned) -> ApiCaller:
    key, _ = create_api_key(RUNTIME.tenant_store(api_env.tenants_table), TENANT)
    return ApiCaller(key)


@pytest.fixture
def dead(owner: ApiCaller) -> JobRecord:
    """A session claimed by a worker that died: its lease ended a minute ago."""
    from functions.api import app as api_app

    opened = owner.call("POST", "/v1/browser-sessions", body={"idle_timeout_s": 60})
    assert opened.status == 201, opened.body
    now = int(utcnow().timestamp())
    store = api_app.services().store
    store.claim(
        TENANT,
        opened.body["session_id"],
        owner="w-dead",
        lease_until=now - 60,
        now=now,
        started_at=iso(utcnow()),
    )
    return store.get(TENANT, opened.body["session_id"])


def test_the_api_counts_a_session_it_finds_lost(
    owner: ApiCaller, dead: JobRecord, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    found = owner.call("GET", f"/v1/browser-sessions/{dead.job_id}")
    assert found.body["status"] == "lost"
    assert lost_counts(capsys.readouterr().out) == [(metrics_names.SESSIONS_SERVICE, 1.0)]


def test_a_workers_lease_watch_counts_a_session_it_takes_back(
    dead: JobRecord, capsys: pytest.CaptureFixture[str]
) -> None:
    from functions.api import app as api_app

    services = api_app.services()
    watch = LeaseWatch(
        services,
        pool=dead.pool,
        lease_s=60,
        log=JobLog(),
        on_sessions_lost=WorkerMetrics(dead.pool).sessions_lost,
    )
    capsys.readouterr()
    watch.look()
    assert lost_counts(capsys.readouterr().out) == [(metrics_names.SESSIONS_SERVICE, 1.0)]
    assert services.store.get(TENANT, dead.job_id).error.kind == "lease_expired"  # type: ignore[union-attr]


def test_the_sweeper_counts_a_session_it_takes_back(
    owner: ApiCaller, dead: JobRecord, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    report: Any = sweeper_timer(interval_s=3600)._action()  # one EventBridge tick
    assert report["sessions_lost"] == 1 and report["taken_back"] == [dead.job_id]
    assert lost_counts(capsys.readouterr().out) == [(metrics_names.SESSIONS_SERVICE, 1.0)]
    # Already taken back: the caller reads lost, and nobody counts it twice.
    assert owner.call("GET", f"/v1/browser-sessions/{dead.job_id}").body["status"] == "lost"
    assert lost_counts(capsys.readouterr().out) == []
