"""Every bench prints the commit and the load it measured under; CPU per job prints the
spread of its paired rounds (bench/common.py, bench/cpu_per_job.py)."""

from __future__ import annotations

import re

import pytest

from bench.common import Measured, commit
from bench.cpu_per_job import spread, whole_rounds


def test_a_bench_prints_its_commit_and_the_load_before_and_after_it_measured(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Measured("bench/x.py") as measured:
        print("figures")
        measured.end()
        print("CPU per job: the target's line")
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"bench/x\.py: commit [0-9a-f]{7,}( \+ local changes)?, \d{4}-\d\d-\d\d \d\d:\d\d UTC, "
        r"\d+ CPUs; load average before [\d.]+ [\d.]+ [\d.]+ \(1, 5, 15 min\)",
        lines[0],
    ), lines[0]
    assert lines[1] == "figures"
    assert lines[2].startswith("load average after ")
    # Ended once: the target's line stays last.
    assert lines[3:] == ["CPU per job: the target's line"]


def test_the_commit_is_the_checkouts() -> None:
    assert re.fullmatch(r"[0-9a-f]{9}( \+ local changes)?", commit())


def test_the_spread_names_the_median_and_the_middle_half_of_the_rounds() -> None:
    text = spread([1.0, 1.1, 1.2, 1.3, 2.0])
    assert text.startswith("median 1.200, middle half 1.100-1.300 (+/-8.3%), min 1.00, max 2.00")


def test_a_round_in_which_the_worker_recycled_its_browser_is_left_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The old browser's helpers leave the tree with all the CPU they used: a part below zero.
    bare = [{"bare: Chromium": 0.3}, {"bare: Chromium": 0.31}, {"bare: Chromium": 0.29}]
    platform = [{"worker: Chromium": 0.35}, {"worker: Chromium": -1.2}, {"worker: Chromium": 0.36}]
    kept = whole_rounds({"bare": bare, "platform": platform})
    assert kept == {"bare": [bare[0], bare[2]], "platform": [platform[0], platform[2]]}
    assert "rounds left out (a browser recycled" in capsys.readouterr().out


def test_the_memory_bench_reads_its_child_past_the_header_and_gives_no_ratio_for_a_failed_side(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The child is the same script: its first line is the header every bench prints. Read as
    # the answer, it made the bare side count no job and its ratio come out as 28.7x.
    import io

    from bench.common import MemoryRun, next_line
    from bench.worker_memory import report

    child = io.StringIO("bench/worker_memory.py: commit abc, ...\nready\ndone 150 61.20\n")
    assert next_line(child, ("ready", "done")) == "ready\n"
    assert next_line(child, ("done",)) == "done 150 61.20\n"
    assert next_line(child, ("done",)) == ""
    platform, bare = MemoryRun("platform", 10), MemoryRun("bare loop, worker's launch", 10)
    platform.succeeded, bare.succeeded = 10, 0
    report({"platform": platform, "bare": bare}, 2)
    out = capsys.readouterr().out
    assert "no ratio with bare loop, worker's launch: 0 of 10 jobs succeeded" in out
    assert "memory ratio" not in out


def test_a_short_poll_beside_one_that_found_a_job_is_that_jobs_request() -> None:
    """The receiver looks at the high queue beside the normal one each time a slot asks for a
    job: that empty poll is the job's request. An empty long poll, and an idle slot's look
    with no job found beside it, are idle capacity (bench/aws_requests.py)."""
    from bench.aws_requests import FOUND_NOTHING, IDLE_RECEIVE, idle_polls

    found = "sqs.ReceiveMessage"
    calls = [
        (10.000, "w1", found),  # 0: a job from the normal queue...
        (10.004, "w1", FOUND_NOTHING),  # 1: ...and the high queue beside it
        (10.004, "w2", FOUND_NOTHING),  # 2: another worker's look, nothing beside it
        (12.000, "w1", FOUND_NOTHING),  # 3: an idle slot's look, seconds later
        (14.000, "w1", IDLE_RECEIVE),  # 4: an empty long poll
        (14.010, "w1", "dynamodb.GetItem"),  # 5: not a poll
    ]
    assert idle_polls(calls) == {2, 3, 4}


def test_a_workers_stop_is_set_apart_from_its_jobs_requests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A worker deletes its session inbox once, as it stops: not a job's request
    (bench/aws_requests.py), as its making of it before the count is not."""
    from bench.aws_requests import Request, report

    def call(at: float, operation: str, caller: str) -> Request:
        return Request((at, "local-worker-1", operation, 1, "pf-jobs", caller))

    requests = [
        call(1.0, "dynamodb.UpdateItem", "pagefleet.jobs.lifecycle.worker.claim"),
        call(2.0, "dynamodb.UpdateItem", "pagefleet.jobs.lifecycle.worker.finish"),
        call(9.0, "sqs.DeleteQueue", "browser_task.run.inbox.stop"),
        call(9.1, "dynamodb.PutItem", "browser_task.run.inbox.stop"),
    ]
    report(requests, 1)
    out = capsys.readouterr().out
    assert "AWS requests per job: 2.0 " in out
    assert "a worker's stop 2 in the run" in out
