"""Listing with filters (name, workflow, schedule, with or without a status): both stores
keep the same jobs, newest first, fill pages by reading on, and stop after a bounded number
of reads."""

from __future__ import annotations

from typing import Any

import pytest

from pagefleet.jobs import listing
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.ports import JobFilter
from pagefleet.jobs.service import JobServices, submit_job
from pagefleet.jobs.states import JobStatus
from pagefleet.jobs.submission import JobSubmission
from pagefleet.workflow.versions import WorkflowDefinition, put_version

STEPS = [
    {"action": "goto", "url": "http://127.0.0.1:9/"},
    # A step with a "name" of its own: the name filter must not take it for the job's.
    {"action": "extract", "name": "nightly", "selector": "h1"},
]
SCHEDULE = "01JSCHEDULE000000000000000"


def job(svc: JobServices, **extra: Any) -> str:
    schedule = extra.pop("schedule", None)
    body = {**extra} if "workflow" in extra else {"steps": STEPS, **extra}
    submission = JobSubmission.model_validate(body)
    made = submit_job(
        svc, "t", submission, schedule=(schedule, "2026-12-01T00:00:00Z") if schedule else None
    )
    return made.job.job_id


def every_page(
    svc: JobServices, where: JobFilter, *, status: JobStatus | None = None, limit: int = 2
) -> list[list[str]]:
    pages: list[list[str]] = []
    start = None
    while True:
        page, start = svc.store.list_page(
            "t", status=status, limit=limit, start_key=start, where=where
        )
        assert len(page) <= limit
        pages.append([j.job_id for j in page])
        if start is None:
            return pages


def test_each_filter_keeps_exactly_its_jobs_newest_first(svc: JobServices) -> None:
    assert svc.workflows is not None
    put_version(
        svc.workflows, "t", "shop", WorkflowDefinition.model_validate({"steps": STEPS}), "x"
    )
    nightly = [job(svc, name="nightly") for _ in range(3)]
    shop = [job(svc, workflow="shop") for _ in range(2)]
    scheduled = [job(svc, name="nightly", schedule=SCHEDULE) for _ in range(2)]
    other = [job(svc, name="Nightly"), job(svc, name='night"ly'), job(svc)]
    submit_job(svc, "other", JobSubmission.model_validate({"steps": STEPS, "name": "nightly"}))

    def listed(where: JobFilter, status: JobStatus | None = None) -> list[str]:
        return [i for page in every_page(svc, where, status=status) for i in page]

    newest = lambda ids: sorted(ids, reverse=True)  # noqa: E731
    assert listed(JobFilter(name="nightly")) == newest(nightly + scheduled)
    assert listed(JobFilter(name='night"ly')) == [other[1]]
    assert listed(JobFilter(workflow="shop")) == newest(shop)
    assert listed(JobFilter(schedule_id=SCHEDULE)) == newest(scheduled)
    assert listed(JobFilter(name="nightly", schedule_id=SCHEDULE)) == newest(scheduled)
    assert listed(JobFilter(name="shop@1", workflow="shop")) == newest(shop)  # its default name
    assert listed(JobFilter(workflow="nope")) == []
    svc.store.transition("t", nightly[0], JobStatus.CANCELLED, at=iso(utcnow()))
    assert listed(JobFilter(name="nightly"), JobStatus.CANCELLED) == [nightly[0]]
    assert listed(JobFilter(name="nightly"), JobStatus.QUEUED) == newest(nightly[1:] + scheduled)


def test_pages_are_filled_by_reading_on_while_matches_are_few(
    svc: JobServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "READ_ITEMS", 2)
    monkeypatch.setattr(listing, "MAX_READS", 5)
    ids = [job(svc, name="rare" if i % 3 == 0 else None) for i in range(9)]
    # A read takes two jobs: three matches among nine take reading on to fill the page.
    page, _ = svc.store.list_page(
        "t", status=None, limit=3, start_key=None, where=JobFilter(name="rare")
    )
    assert [j.job_id for j in page] == sorted(ids[::3], reverse=True)


def test_a_request_reads_a_bounded_number_of_items_and_may_come_back_short(
    svc: JobServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "READ_ITEMS", 2)
    monkeypatch.setattr(listing, "MAX_READS", 2)
    rare = job(svc, name="rare")
    for _ in range(6):
        job(svc)
    pages = every_page(svc, JobFilter(name="rare"), limit=2)
    # Two reads of two jobs a request: four of the seven, so the first page is short (it
    # holds one match at most) and goes on.
    assert len(pages) == 2
    assert len(pages[0]) < 2
    assert [i for page in pages for i in page] == [rare]


def test_a_read_that_keeps_more_than_the_page_goes_on_from_the_last_job_shown(
    svc: JobServices,
) -> None:
    ids = sorted((job(svc, name="many") for _ in range(5)), reverse=True)
    pages = every_page(svc, JobFilter(name="many"), limit=2)
    assert pages[:3] == [ids[:2], ids[2:4], ids[4:]]
    assert [i for page in pages for i in page] == ids
