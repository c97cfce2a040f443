"""The watch marks a running job's worker reads with its cancel flag: set and extended by
the live function, past their time ignored, forgotten on unwatch; on both stores."""

from __future__ import annotations

import pytest

from pagefleet.errors import NotFound
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.service import JobServices, submit_job

REQUEST = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://127.0.0.1:9/"}]})
NOW = 2_000_000_000


def test_watchers_are_read_with_the_cancel_flag_until_their_time(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    assert svc.store.run_signals("t", job.job_id, now=NOW).watchers == frozenset()
    svc.store.watch("t", job.job_id, "c1", until=NOW + 30, now=NOW)
    svc.store.watch("t", job.job_id, "c2", until=NOW + 10, now=NOW)
    signals = svc.store.run_signals("t", job.job_id, now=NOW + 5)
    assert signals.watchers == {"c1", "c2"} and signals.cancel_requested is False
    assert svc.store.run_signals("t", job.job_id, now=NOW + 11).watchers == {"c1"}
    svc.store.watch("t", job.job_id, "c1", until=NOW + 60, now=NOW + 20)  # extended
    # c2 ran out and was dropped by that watch; c1 holds until its new time
    assert svc.store.run_signals("t", job.job_id, now=NOW + 50).watchers == {"c1"}
    svc.store.unwatch("t", job.job_id, "c1")
    svc.store.unwatch("t", job.job_id, "c1")  # again: harmless
    assert svc.store.run_signals("t", job.job_id, now=NOW).watchers == frozenset()


def test_another_tenants_job_or_none_cannot_be_marked(svc: JobServices) -> None:
    job = submit_job(svc, "t", REQUEST).job
    with pytest.raises(NotFound):
        svc.store.watch("other", job.job_id, "c1", until=NOW + 30, now=NOW)
    with pytest.raises(NotFound):
        svc.store.watch("t", "0" * 26, "c1", until=NOW + 30, now=NOW)
    assert svc.store.run_signals("other", job.job_id, now=NOW).watchers == frozenset()
    # the job's record was not touched by the refused marks
    assert svc.store.run_signals("t", job.job_id, now=NOW).watchers == frozenset()
