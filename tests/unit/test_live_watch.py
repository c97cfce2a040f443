"""Watching a job's page on fakes: its owner's connection marks it watched for a while (the
mark the worker reads with the cancel flag), another tenant's gets "no such job" and marks
nothing, an ended job has nothing to watch, and a frame is cut into messages that each fit
one API Gateway WebSocket frame (32 KB)."""

from __future__ import annotations

import base64
import json
from typing import Any

from pagefleet.jobs.models import JobRequest, iso, utcnow
from pagefleet.jobs.service import submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.live import service, watch
from pagefleet.live.frames import FRAME_MAX_PARTS, PART_MAX_BYTES, frame_messages
from pagefleet.live.watch import WATCH_TTL_S
from tests.unit.test_live_service import World

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://x/"}]})


def _send(world: World, cid: str, action: str, **body: Any) -> dict[str, Any]:
    text = json.dumps({"action": action, **body})
    return (watch.watch if action == "watch" else watch.unwatch)(world.live, cid, text)


def _watchers(world: World, tenant: str, job_id: str) -> frozenset[str]:
    return world.jobs.store.run_signals(tenant, job_id, now=int(world.clock.t)).watchers


def test_the_owner_watches_for_a_while_and_another_tenant_marks_nothing() -> None:
    world = World()
    job = submit_job(world.jobs, "tenant-a", REQUEST).job
    service.connect(world.live, "mine", authorization=f"Bearer {world.key_a}", ticket=None)
    service.connect(world.live, "theirs", authorization=f"Bearer {world.key_b}", ticket=None)

    answer = _send(world, "mine", "watch", job_id=job.job_id)
    assert answer["type"] == "watching" and answer["until"] == world.clock.t + WATCH_TTL_S
    assert answer["renew_within_s"] <= WATCH_TTL_S // 2
    refused = _send(world, "theirs", "watch", job_id=job.job_id)
    assert (refused["type"], refused["code"]) == ("error", "not_found")
    assert _watchers(world, "tenant-a", job.job_id) == {"mine"}
    assert _watchers(world, "tenant-b", job.job_id) == frozenset()

    world.clock.t += WATCH_TTL_S + 1  # not sent again: the mark runs out
    assert _watchers(world, "tenant-a", job.job_id) == frozenset()
    _send(world, "mine", "watch", job_id=job.job_id)
    assert _watchers(world, "tenant-a", job.job_id) == {"mine"}
    assert _send(world, "mine", "unwatch", job_id=job.job_id)["type"] == "unwatched"
    assert _watchers(world, "tenant-a", job.job_id) == frozenset()


def test_an_ended_job_or_a_bad_message_is_refused_naming_why() -> None:
    world = World()
    job = submit_job(world.jobs, "tenant-a", REQUEST).job
    world.jobs.store.transition("tenant-a", job.job_id, JobStatus.CANCELLED, at=iso(utcnow()))
    service.connect(world.live, "mine", authorization=f"Bearer {world.key_a}", ticket=None)
    ended = _send(world, "mine", "watch", job_id=job.job_id)
    assert ended["code"] == "job_ended" and "cancelled" in ended["message"]
    bad = watch.watch(world.live, "mine", json.dumps({"action": "watch", "job_id": "A/B"}))
    assert bad["code"] == "invalid_request" and "job_id" in bad["message"]
    unknown = _send(world, "gone", "watch", job_id=job.job_id)
    assert unknown["code"] == "not_connected"


def test_a_frame_is_cut_into_messages_that_each_fit_a_websocket_frame() -> None:
    jpeg = b"\xff\xd8" + bytes(range(256)) * 250 + b"\xff\xd9"  # ~64 KB
    data = base64.b64encode(jpeg).decode()
    messages = frame_messages("j1", 7, data, width=1280, height=800)
    assert 1 < len(messages) <= FRAME_MAX_PARTS
    assert all(len(m) <= PART_MAX_BYTES for m in messages)
    parts = [json.loads(m) for m in messages]
    assert {p["seq"] for p in parts} == {7} and [p["part"] for p in parts] == [0, 1, 2, 3][
        : len(parts)
    ]
    assert base64.b64decode("".join(p["data"] for p in parts)) == jpeg
    too_big = base64.b64encode(bytes(200_000)).decode()
    assert frame_messages("j1", 8, too_big, width=1, height=1) == []
