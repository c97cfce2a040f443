"""Monitors in the worker, end to end: moto server, real Chromium, the demo site's watched
shop on 127.0.0.1. A result that breaks ``expect`` fails ``data_quality`` with its evidence
kept; a run is compared with a named earlier job by record and by masked screenshot; a
requested video is kept as video.webm.

One worker (one browser) serves the module; the shop's state is set before each job.
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
import pytest
from PIL import Image

from browser_task.__main__ import build_worker
from devstack.demo_site import DemoSite
from devstack.demo_watch import START
from devstack.provision import create_all
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.service import JobServices
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from pagefleet.specs.settings import WorkerSettings
from tests.worker.conftest import RunningWorker, moto_env, submit, wait_for_job

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PRODUCTS = {
    "action": "extract",
    "name": "products",
    "selector": "#products .product",
    "fields": {
        "sku": {"kind": "attribute", "attribute": "data-sku"},
        "name": {"selector": ".name"},
        "price": {"selector": ".price"},
        "stock": {"selector": ".stock"},
    },
}


@dataclass
class Shop:
    settings: WorkerSettings
    services: JobServices
    url: str

    def set(self, **state: Any) -> None:
        body = {**START, **state}
        assert httpx.put(f"{self.url}/watch/state", json=body).status_code == 200

    def run(self, request: dict[str, Any], timeout: float = 90) -> JobRecord:
        job = submit(self.services, request)
        return wait_for_job(self.services, job.job_id, timeout=timeout)

    def artifact(self, job: JobRecord, name: str) -> bytes:
        found = next(a for a in job.artifacts if a.name == name)
        return self.services.artifacts.get(found.key)

    def watch(self, **extra: Any) -> dict[str, Any]:
        return {
            "steps": [
                {"action": "goto", "url": f"{self.url}/watch/"},
                PRODUCTS,
                {"action": "screenshot", "name": "shop"},
            ],
            **extra,
        }


@pytest.fixture(scope="module")
def shop(worker_moto_endpoint: str) -> Iterator[Shop]:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in moto_env(worker_moto_endpoint).items():
            mp.setenv(key, value)
        RUNTIME.reset()
        res = create_all(
            boto3.client("dynamodb"),
            boto3.client("sqs"),
            boto3.client("s3"),
            prefix=f"m{uuid.uuid4().hex[:8]}-",
        )
        settings = WorkerSettings(
            jobs_table=res.jobs_table,
            tenants_table=res.tenants_table,
            artifacts_bucket=res.artifacts_bucket,
            queue_urls=res.queue_urls,
            allow_loopback=True,
            poll_wait_seconds=1,
            heartbeat_seconds=5,
            drain_seconds=5,
        )
        services = RUNTIME.job_services(settings)
        site = DemoSite().start()
        running = RunningWorker(build_worker(settings)).start()
        try:
            yield Shop(settings, services, site.url)
        finally:
            running.stop()
            site.stop()
        RUNTIME.reset()


def test_an_emptied_list_fails_data_quality_once_with_its_evidence_kept(shop: Shop) -> None:
    shop.set(products=[])
    job = shop.run(
        shop.watch(
            max_attempts=3,
            expect={
                "min_items": {"products": 1},
                "schema": {"type": "object", "required": ["products"]},
            },
        )
    )
    assert job.status is JobStatus.FAILED and job.attempt == 1  # not retried
    assert job.error is not None and job.error.kind == "data_quality"
    assert not job.error.retryable
    assert job.error.details == [
        {"path": "result.products", "reason": "has 0 items, expected at least 1"}
    ]
    assert "result.products has 0 items" in job.error.message
    names = {a.name for a in job.artifacts}
    assert {"failure.png", "failure.html"} <= names, names
    assert "trace.zip" not in names  # not retried: on-first-retry records none
    assert b"Nothing to show right now" in shop.artifact(job, "failure.html")


def test_a_price_change_and_a_new_product_are_the_changes_against_a_named_job(
    shop: Shop,
) -> None:
    shop.set()
    baseline = shop.run(shop.watch(monitor={"track": {"products": {"key": "sku"}}}))
    assert baseline.status is JobStatus.SUCCEEDED
    assert baseline.changes is not None and baseline.changes.baseline_job_id is None
    assert "baseline_job_id" in (baseline.changes.note or "")
    products = [dict(p) for p in START["products"]]
    products[1]["price"] = "16.00"
    products.append({"sku": "CMP-4", "name": "Compass", "price": "12.00", "stock": 7})
    shop.set(products=list(reversed(products)))  # reordered too: no change by itself
    monitor = {"track": {"products": {"key": "sku"}}, "baseline_job_id": baseline.job_id}
    job = shop.run(shop.watch(monitor=monitor))
    assert job.status is JobStatus.SUCCEEDED, job.error
    changes = job.changes
    assert changes is not None and changes.changed and changes.baseline_job_id == baseline.job_id
    assert (changes.summary.added, changes.summary.removed, changes.summary.changed) == (1, 0, 1)
    tracked = changes.records["products"]
    assert [r["sku"] for r in tracked.added] == ["CMP-4"]
    (changed,) = tracked.changed
    assert changed.key == "LAN-2"
    assert {k: (v.before, v.after) for k, v in changed.fields.items()} == {
        "price": ("18.50", "16.00")
    }
    assert b'"CMP-4"' in shop.artifact(job, "changes.json")

    # The baseline past its tenant's retention: gone, though TTL has not deleted it (days
    # late on AWS, never here): a run without a baseline, which says why.
    boto3.client("dynamodb").update_item(
        TableName=shop.settings.jobs_table,
        Key={"pk": {"S": f"TENANT#{baseline.tenant_id}"}, "sk": {"S": f"JOB#{baseline.job_id}"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )
    late = shop.run(shop.watch(monitor=monitor))
    assert late.status is JobStatus.SUCCEEDED, late.error
    assert late.changes is not None and late.changes.baseline_job_id is None
    assert f"job {baseline.job_id} is past its retention" in (late.changes.note or "")


def test_a_masked_clock_is_no_change_and_a_moved_button_is_one_with_a_diff(shop: Shop) -> None:
    shop.set()
    masked = {"screenshot": "shop", "mask": ["#clock"], "threshold": 0.002}
    first = shop.run(shop.watch(monitor=masked))
    assert first.status is JobStatus.SUCCEEDED, first.error
    same = shop.run(shop.watch(monitor={**masked, "baseline_job_id": first.job_id}))
    assert same.changes is not None and same.changes.visual is not None
    assert same.changes.visual.ratio == 0 and not same.changes.changed
    assert "diff.png" not in {a.name for a in same.artifacts}
    # Without the mask the clock alone differs (the mask is what made it 0).
    unmasked = {"screenshot": "shop", "threshold": 0.002, "baseline_job_id": first.job_id}
    ticking = shop.run(shop.watch(monitor=unmasked))
    assert ticking.changes is not None and ticking.changes.visual is not None
    assert ticking.changes.visual.ratio > 0

    shop.set(button_left=400)
    moved = shop.run(shop.watch(monitor={**masked, "baseline_job_id": first.job_id}))
    visual = moved.changes.visual if moved.changes else None
    assert visual is not None and visual.ratio > 0.002 and visual.changed, visual
    assert moved.changes is not None and moved.changes.changed
    assert visual.diff_artifact == "diff.png"
    diff = Image.open(io.BytesIO(shop.artifact(moved, "diff.png")))
    assert diff.size == Image.open(io.BytesIO(shop.artifact(moved, "shop.png"))).size


def test_a_requested_video_is_kept_as_webm(shop: Shop) -> None:
    shop.set()
    job = shop.run(shop.watch(options={"video": True, "viewport": {"width": 640, "height": 400}}))
    assert job.status is JobStatus.SUCCEEDED, job.error
    video = shop.artifact(job, "video.webm")
    assert video[:4] == b"\x1a\x45\xdf\xa3"  # EBML: a WebM file
    kept = next(a for a in job.artifacts if a.name == "video.webm")
    assert kept.content_type == "video/webm" and kept.retention == "routine"


def test_without_playwrights_ffmpeg_a_video_job_fails_saying_so(
    shop: Shop, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker looks the path up per job: an empty registry is a worker without ffmpeg.
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path))
    job = shop.run(shop.watch(options={"video": True}))
    assert job.status is JobStatus.FAILED and job.error is not None
    assert job.error.kind == "video_unavailable" and "ffmpeg" in job.error.message
