"""The chaos run in parts (bench/chaos_parts.py): parts add up to one run, a stopped run
goes on from the first part not recorded, and any fault in any part fails the whole."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from bench.chaos_parts import add_part_arguments, part_record, run_parts
from bench.chaos_report import Kill, Run, by_the_faults, recovery_samples
from bench.chaos_sessions import SessionFindings, SessionTraffic
from bench.chaos_traffic import Findings
from devstack.chaos import breaker_deferrals
from pagefleet.jobs.models import JobRequest, epoch_of_iso
from pagefleet.jobs.record import AttemptRecord, JobError, JobRecord
from pagefleet.jobs.states import JobStatus


def arguments(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    add_part_arguments(parser)
    return parser.parse_args(list(argv))


def part(jobs: int, **counts: Any) -> dict[str, Any]:
    samples = counts.pop("samples", {"to_next": [8.0], "to_lease_end": [4.0]})
    # Parts recorded before the freezes were timed have no "clear" samples.
    clear = {k: samples[k] for k in ("to_next_clear", "to_final_clear") if k in samples}
    record = {
        "jobs": jobs,
        "lost": 0,
        "doubled": 0,
        "checks_failed": False,
        "scheduled_times": 10,
        "webhooks_delivered": 50,
        "webhooks_missing": 0,
        "live_gaps": 0,
        "sessions": 5,
        "session_steps": 20,
        "steps_twice": 0,
        "steps_lost": 0,
        "leftovers": 0,
        "leftover_details": [],
        "killed_jobs": 3,
        "samples": {
            "to_next": samples["to_next"],
            "to_lease_end": samples["to_lease_end"],
            "after_lease": [],
            "to_final": [],
            **clear,
        },
        "load": ["0.5", "3.0"],
        "elapsed_s": 900,
    }
    record.update(counts)
    return record


def test_four_parts_add_up_to_the_whole_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tmp_path / "chaos.jsonl"
    asked: list[int] = []

    def run_part(_args: argparse.Namespace, jobs: int) -> dict[str, Any]:
        asked.append(jobs)
        return part(jobs)

    status = run_parts(arguments("--parts", "4", "--record", str(record)), run_part)

    assert status == 0
    assert asked == [500, 500, 500, 500]
    assert [json.loads(line)["part"] for line in record.read_text().splitlines()] == [1, 2, 3, 4]
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("chaos: 2000 jobs, 0 lost, 0 doubled; schedules 40 fired")
    assert "sessions 20 with 80 steps: 0 run twice, 0 lost, 0 leftovers" in last


def test_a_resumed_run_starts_at_the_first_part_not_recorded(tmp_path: Path) -> None:
    record = tmp_path / "chaos.jsonl"
    record.write_text("".join(json.dumps({**part(500), "part": n, "of": 4}) + "\n" for n in (1, 2)))
    asked: list[int] = []

    def run_part(_args: argparse.Namespace, jobs: int) -> dict[str, Any]:
        asked.append(jobs)
        return part(jobs)

    run_parts(arguments("--parts", "4", "--record", str(record), "--resume"), run_part)

    assert asked == [500, 500]  # parts 3 and 4 only
    assert len(record.read_text().splitlines()) == 4


def test_a_step_run_twice_in_one_part_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parts = iter([part(500), part(500, steps_twice=1), part(500)])
    status = run_parts(arguments("--jobs", "1500", "--parts", "3"), lambda _a, _j: next(parts))
    assert status == 1
    assert "1 run twice" in capsys.readouterr().out


def test_recovery_percentiles_are_taken_over_every_parts_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One slow recovery in the second part weighs as one sample of ten (p99 37.1 s), not as
    # half of an average of the parts' own p99s (24 s).
    quick = {"to_next": [8.0] * 9, "to_lease_end": []}
    slow = {"to_next": [40.0], "to_lease_end": []}
    parts = iter([part(500, samples=quick), part(500, samples=slow)])
    run_parts(arguments("--jobs", "1000", "--parts", "2"), lambda _a, _j: next(parts))
    assert "recovery to next attempt p50 / p99 8.0 s / 37.1 s" in capsys.readouterr().out


def test_recoveries_another_fault_held_up_are_told_apart() -> None:
    # Three killed workers' jobs: one taken back while the embedded AWS was frozen for 12 s
    # (its recovery holds the freeze), one put back while its site's breaker was open (it
    # waited for the site), one after both. A deferral before its kill does not count.
    run = Run(frozen=[(100.0, 112.0)], breaker_deferred={"deferred": [150.0], "clear": [110.0]})
    run.killed = {
        "frozen": Kill(at=95.0, attempt=1, lease_end=105.0),
        "deferred": Kill(at=140.0, attempt=1, lease_end=150.0),
        "clear": Kill(at=120.0, attempt=1, lease_end=130.0),
    }
    run.next_attempt = {"frozen": 125.0, "deferred": 180.0, "clear": 133.0}
    run.settled_at = {"frozen": 128.0, "deferred": 183.0, "clear": 136.0}
    samples = recovery_samples(run)
    assert samples["to_next"] == [30.0, 40.0, 13.0]
    assert samples["to_next_clear"] == [13.0]
    assert samples["to_final_clear"] == [16.0]
    # A part's record keeps them, and the summary of the parts prints them apart.
    assert part_record(
        jobs=3,
        lost=0,
        doubled=0,
        found=Findings(jobs=0),
        sessions=SessionFindings(),
        samples=samples,
        killed=3,
        load=("0.1", "0.2"),
        elapsed=1.0,
    )["samples"]["to_next_clear"] == [13.0]


def test_the_summary_prints_the_recoveries_without_a_freeze_when_parts_timed_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    timed = {"to_next": [8.0, 30.0], "to_lease_end": [], "to_next_clear": [8.0]}
    parts = iter([part(500, samples=timed), part(500)])
    run_parts(arguments("--jobs", "1000", "--parts", "2"), lambda _a, _j: next(parts))
    out = capsys.readouterr().out
    assert "held up by no other fault (1 of the killed jobs of 1 part(s))" in out


def test_breaker_deferrals_are_read_from_the_workers_json_logs(tmp_path: Path) -> None:
    log = tmp_path / "worker-3.log"
    deferral = {
        "level": "INFO",
        "message": "message handled without running",
        "timestamp": "2026-12-05 10:14:29,149+0000",
        "job_id": "01m92v5b8648sjppxc7j0z710x",
        "reason": "circuit open for http://127.0.0.1:38005 (this tenant's jobs); next try in 5 s",
    }
    other = {**deferral, "reason": "a copy of a job running elsewhere"}
    log.write_text("\n".join([json.dumps(deferral), json.dumps(other), "not json"]) + "\n")
    found = breaker_deferrals([log, tmp_path / "worker-4.log"])  # one never written
    assert found == {"01m92v5b8648sjppxc7j0z710x": [1796465669.149]}


def crashed(worker: str, started: str, finished: str) -> JobRecord:
    request = JobRequest.model_validate({"steps": [{"action": "goto", "url": "http://a.test/"}]})
    error = JobError(kind="browser_crashed", message="Target page, context or browser closed")
    return JobRecord(
        tenant_id="t",
        job_id="j",
        status=JobStatus.FAILED,
        request=request,
        created_at="2026-12-05T10:00:00.000Z",
        updated_at=finished,
        correlation_id="c",
        pool="standard",
        attempt=3,
        error=error,
        attempts=[
            AttemptRecord(
                attempt=3,
                worker=worker,
                started_at=started,
                finished_at=finished,
                status=JobStatus.FAILED,
                error=error,
            )
        ],
    )


def test_a_chromium_kill_as_a_jobs_claim_was_written_is_the_faults_doing() -> None:
    # The bench reads which jobs a worker held just after it kills its Chromium; a job whose
    # claim was being written then is missed by that read. Its last attempt's worker and
    # times say the kill hit it (its context opens while the claim is written): a second
    # before its start counts, a kill on another worker or after it ended does not.
    at = epoch_of_iso("2026-12-05T10:00:05.000Z")
    run = Run(chromium_killed_at=[("local-worker-2", at)])
    hit = crashed("local-worker-2", "2026-12-05T10:00:06.000Z", "2026-12-05T10:00:07.000Z")
    other = crashed("local-worker-1", "2026-12-05T10:00:06.000Z", "2026-12-05T10:00:07.000Z")
    later = crashed("local-worker-2", "2026-12-05T10:00:09.000Z", "2026-12-05T10:00:10.000Z")
    assert by_the_faults(run, "j", hit)
    assert not by_the_faults(run, "j", other)
    assert not by_the_faults(run, "j", later)
    # Read as held at the kill: the bench's first way still counts.
    run.browser_killed.add("j")
    assert by_the_faults(run, "j", later)


class _NoClient:
    def client(self) -> _NoClient:
        return self

    def close(self) -> None:
        pass


def test_a_leftover_is_one_a_sweeper_pass_after_the_look_did_not_remove(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An inbox whose worker's registry entry lapsed just after the run's last sweep is the
    # next pass's to remove, not a leftover; one the pass leaves is.
    traffic = SessionTraffic(_NoClient(), site=None, drivers=0)  # type: ignore[arg-type]
    present = {"queue dead-inbox", "queue stuck-inbox"}
    swept: list[bool] = []

    def sweep() -> None:
        swept.append(True)
        present.discard("queue dead-inbox")

    monkeypatch.setattr(traffic, "_leftover_slots", lambda store: [])
    monkeypatch.setattr(traffic, "_leftover_queues", lambda: sorted(present))
    store: Any = None
    assert traffic.findings(store, sweep).leftovers == ["queue stuck-inbox"]
    assert swept == [True]
    present.clear()
    assert traffic.findings(store, sweep).leftovers == []
    assert swept == [True]  # nothing seen: no pass asked for
