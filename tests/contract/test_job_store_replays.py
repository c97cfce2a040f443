"""A job's links to its offline replays in the store (fake and DynamoDB alike): appended in
order, bounded, and none for a job that does not exist."""

from __future__ import annotations

from pagefleet.jobs.models import MAX_REPLAYS_LISTED, JobRequest
from pagefleet.jobs.service import JobServices, submit_job

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})


def test_replays_are_listed_oldest_first_up_to_their_bound(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    assert job.replays == []
    for n in range(MAX_REPLAYS_LISTED + 2):
        svc.store.note_replay("t", job.job_id, f"r{n}")
    listed = svc.store.get("t", job.job_id).replays
    assert listed == [f"r{n}" for n in range(MAX_REPLAYS_LISTED)]


def test_a_replay_of_a_missing_job_or_another_tenants_links_nothing(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    svc.store.note_replay("other", job.job_id, "r1")
    svc.store.note_replay("t", "nosuchjob", "r1")
    assert svc.store.get("t", job.job_id).replays == []
