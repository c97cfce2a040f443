"""bench/cost.py's scaling from the jobs it ran to 1,000 jobs (what it then prices)."""

from __future__ import annotations

import pytest

from bench.cost import per_thousand, region_line
from pagefleet.tenancy.usage import UsageRow


def test_counts_scale_from_the_jobs_run_to_a_thousand() -> None:
    ran = UsageRow(
        tenant_id="t",
        day="2026-11-30",
        jobs=20,
        attempts=21,
        browser_seconds=208.6,
        page_requests=40,
        artifact_bytes=1_234,
        artifact_puts=20,
    )
    scaled = per_thousand(ran)
    assert (scaled.jobs, scaled.attempts, scaled.page_requests) == (1000, 1050, 2000)
    assert scaled.browser_seconds == pytest.approx(10_430.0)
    assert (scaled.artifact_bytes, scaled.artifact_puts) == (61_700, 1000)


def test_nothing_to_scale_without_jobs() -> None:
    with pytest.raises(ValueError, match="no jobs"):
        per_thousand(UsageRow(tenant_id="t", day="2026-11-30"))


def test_region_line_has_the_documented_form() -> None:
    assert region_line("us-east-1", 0.09243) == "us-east-1: $0.092 per 1,000 jobs"


def test_the_same_usage_costs_less_on_graviton() -> None:
    from bench.cost import by_architecture
    from pagefleet.pricing import Worker

    ten_second_jobs = per_thousand(
        UsageRow(tenant_id="t", day="2026-12-01", jobs=20, attempts=20, browser_seconds=204.0)
    )
    totals = by_architecture(ten_second_jobs, Worker(vcpu=2, memory_gb=4, slots=6), 7)
    assert set(totals) == {"x86_64", "arm64"}
    # Fargate's arm64 prices are 20 % under x86's; the rest (Lambda, tables) is the same.
    assert totals["arm64"] < totals["x86_64"]
    assert totals["x86_64"] - totals["arm64"] > 0.1 * totals["x86_64"]


def test_slots_follow_the_measured_footprint_bounded_by_memory_and_cpu() -> None:
    from bench.cost import Footprint, recommended_slots

    # 4 GB task, 2 vCPU: 80 % of 4096 MB = 3277 MB, less 400 MB idle = 2877 MB room.
    light = Footprint(idle_mb=400, per_slot_mb=50, cpu_per_slot_s=0.04)
    assert recommended_slots(4096, 2048, light) == (57, 35)  # CPU: 1.4 vCPU / 0.04
    real = Footprint(idle_mb=400, per_slot_mb=300, cpu_per_slot_s=0.04)
    assert recommended_slots(4096, 2048, real) == (9, 35)
    # A tree that does not fit its task still gets one slot (the pool is then too small).
    assert recommended_slots(512, 256, Footprint(600, 300, 0.5)) == (1, 1)
