"""A bench prints no ratio or figure with a side that did not run every job it was asked
to (or whose child's answer was misread): it says which side ran what (bench/common.py's
``ran_every_job``). The memory bench printed a ratio of 28.7 from a bare side of 0 jobs."""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest


def test_a_side_short_of_its_jobs_is_named_with_what_it_ran(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.common import ran_every_job

    assert ran_every_job("bare loop", 4, 4)
    assert capsys.readouterr().out == ""
    assert not ran_every_job("bare loop", 0, 4)
    assert capsys.readouterr().out == "no ratio with bare loop: 0 of 4 jobs succeeded\n"


def test_a_childs_answer_is_its_json_line_not_its_header_or_warnings() -> None:
    from bench.common import child_answer

    out = 'bench/cpu_per_job.py: commit abc, ...\n{"succeeded": 3, "per_job": {"a": 1}}\nbye\n'
    assert child_answer(out) == {"succeeded": 3, "per_job": {"a": 1}}
    with pytest.raises(ValueError, match="no answer"):
        child_answer("bench/cpu_per_job.py: commit abc, ...\n")


def test_cpu_per_job_leaves_out_a_round_in_which_a_side_ran_fewer_jobs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.cpu_per_job import complete_rounds

    sides = {
        "bare": [{"bare: Chromium": 0.3}, {"bare: Chromium": 0.01}, {"bare: Chromium": 0.3}],
        "platform": [{"worker: Chromium": 0.4}, {"worker: Chromium": 0.4}, {"worker: x": 0.0}],
    }
    ran = {"bare": [10, 2, 10], "platform": [10, 10, 0]}
    kept = complete_rounds(sides, ran, 10)
    assert kept == {"bare": [sides["bare"][0]], "platform": [sides["platform"][0]]}
    out = capsys.readouterr().out
    assert "no ratio with bare, round 2: 2 of 10 jobs succeeded" in out
    assert "no ratio with platform, round 3: 0 of 10 jobs succeeded" in out
    with pytest.raises(SystemExit, match="no round"):
        complete_rounds(sides, {"bare": [0, 0, 0], "platform": [10, 10, 10]}, 10)


def test_e2e_throughput_gives_no_ratio_with_a_side_whose_jobs_failed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.e2e_throughput import Run, whole_sides

    totals = {
        "bare": Run("bare loop", 10, 5.0, 10),
        # Failed fast: its rate (jobs asked over seconds) would be ten times the bare one's.
        "platform": Run("platform", 10, 0.5, 0),
    }
    assert whole_sides(totals) == {"bare"}
    assert "no ratio with platform: 0 of 10 jobs succeeded" in capsys.readouterr().out


def test_worker_python_prints_no_cpu_for_a_child_that_ran_fewer_jobs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.worker_python import whole_sides

    cpu = {"Python": 1.0, "driver": 1.0, "Chromium": 1.0}
    assert whole_sides({"bare": {"cpu": cpu, "succeeded": 4}, "worker": {"succeeded": 4}}, 4)
    assert not whole_sides({"bare": {"cpu": cpu, "succeeded": 1}, "worker": {"succeeded": 4}}, 4)
    assert "no ratio with bare: 1 of 4 jobs succeeded" in capsys.readouterr().out


def test_cost_prices_nothing_when_a_job_did_not_succeed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.cost as cost

    def run(args: argparse.Namespace) -> tuple[Any, int, list[str], Any]:
        return SimpleNamespace(jobs=3), 30, ["succeeded", "failed", "succeeded"], None

    def report(*args: object) -> None:
        raise AssertionError("priced a run in which a job failed")

    monkeypatch.setattr(sys, "argv", ["bench/cost.py", "--jobs", "3"])
    monkeypatch.setattr(cost, "run", run)
    monkeypatch.setattr(cost, "report", report)
    monkeypatch.setattr(cost, "slots_report", report)
    assert cost.main() == 1
    assert "no ratio with the local stack: 2 of 3 jobs succeeded" in capsys.readouterr().out


def test_fairness_gives_no_ratio_from_a_flood_whose_jobs_failed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.fairness as fairness
    from bench.fairness import Scenario

    scenarios = [
        Scenario("idle", None, [0.1, 0.1]),
        Scenario("flood, A capped", 1, [0.5, 0.5], a_seconds=10, a_jobs=4),
        # A's jobs failed at once: B found no queue, and its delay looks fair.
        Scenario("flood, A uncapped", 2, [0.1, 0.1], a_seconds=1, a_jobs=4, failed=4),
    ]
    monkeypatch.setattr(sys, "argv", ["bench/fairness.py", "--flood", "4", "--jobs", "2"])
    monkeypatch.setattr(fairness, "LocalStack", lambda **kwargs: nullcontext())
    monkeypatch.setattr(fairness, "run", lambda stack, args: scenarios)
    assert fairness.main() == 1
    out = capsys.readouterr().out
    assert "no ratio with flood, A uncapped: 2 of 6 jobs succeeded" in out
    assert "flood, A capped: B's median queue delay is 5.0x its idle value" in out
    assert "flood, A uncapped: B's" not in out


def test_aws_requests_gives_no_figure_a_job_when_a_job_failed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import bench.aws_requests as aws_requests

    def report(*args: object) -> None:
        raise AssertionError("counted the requests of a run in which a job failed")

    stack = SimpleNamespace(cleanup_logs=lambda: None)
    monkeypatch.setattr(sys, "argv", ["bench/aws_requests.py", "--jobs", "4"])
    monkeypatch.setattr(aws_requests, "LocalStack", lambda **kwargs: nullcontext(stack))
    monkeypatch.setattr(aws_requests, "lift_submission_rate", lambda stack: None)
    monkeypatch.setattr(aws_requests, "run_jobs", lambda stack, count, timeout: count - 1)
    monkeypatch.setattr(aws_requests.tempfile, "mkdtemp", lambda prefix: str(tmp_path))
    monkeypatch.setattr(aws_requests, "wait_quiet", lambda log_dir, timeout: None)
    monkeypatch.setattr(aws_requests, "report", report)
    assert aws_requests.main() == 1
    assert "no ratio with the local stack: 3 of 4 jobs succeeded" in capsys.readouterr().out
