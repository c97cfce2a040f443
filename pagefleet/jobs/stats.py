"""Fleet figures for a tenant: what waits, what runs, how jobs end and how long they take.

``GET /v1/stats``, ``pagefleet stats`` and the console's fleet view all show these numbers.
Counts come from the status index (one COUNT query per waiting or running state); rates and
percentiles from the tenant's jobs made in the window (newest first, up to a sample).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus

LIVE_STATES = (
    JobStatus.SCHEDULED,
    JobStatus.WAITING,
    JobStatus.QUEUED,
    JobStatus.RETRY_SCHEDULED,
    JobStatus.RUNNING,
    # Not running and not waiting to: each waits for a person's resolution.
    JobStatus.NEEDS_REVIEW,
)
DEFAULT_WINDOW_S = 3600
SAMPLE = 1000


@dataclass(frozen=True)
class Percentiles:
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None

    @classmethod
    def of(cls, values: list[float]) -> Percentiles:
        if not values:
            return cls()
        if len(values) == 1:
            return cls(values[0], values[0], values[0])
        import statistics  # on first call: 7 ms of a cold start compiled from source

        cuts = statistics.quantiles(values, n=100, method="inclusive")
        return cls(round(cuts[49], 3), round(cuts[94], 3), round(cuts[98], 3))


@dataclass(frozen=True)
class FleetStats:
    window_s: int
    counts: dict[str, int] = field(default_factory=dict)  # jobs in each live state now
    # The oldest job waiting to start (queued, or a due retry); a running job never counts.
    oldest_queued_age_s: float | None = None
    finished: dict[str, int] = field(default_factory=dict)  # ended in the window, by state
    success_rate: float | None = None
    failure_rate: float | None = None
    timeout_rate: float | None = None
    retry_rate: float | None = None  # share of ended jobs that needed more than one attempt
    duration_s: Percentiles = Percentiles()
    queue_delay_s: Percentiles = Percentiles()
    sampled: int = 0


def fleet_stats(
    jobs: list[JobRecord],
    counts: dict[JobStatus, int],
    now: float,
    window_s: int,
    oldest_waiting_since: float | None = None,
) -> FleetStats:
    """The figures from the live counts, since when the oldest job waiting to start has
    waited (epoch s), and the jobs made in the window (newest first)."""
    since = now - window_s
    recent = [j for j in jobs if _epoch(j.created_at) >= since]
    ended = [j for j in recent if j.status.is_final]
    finished: dict[str, int] = {}
    for job in ended:
        finished[job.status.value] = finished.get(job.status.value, 0) + 1
    total = len(ended)

    def share(*states: JobStatus) -> float | None:
        if not total:
            return None
        return round(sum(finished.get(s.value, 0) for s in states) / total, 4)

    oldest = oldest_waiting_since
    return FleetStats(
        window_s=window_s,
        counts={s.value: counts.get(s, 0) for s in LIVE_STATES},
        oldest_queued_age_s=round(now - oldest, 3) if oldest is not None else None,
        finished=finished,
        success_rate=share(JobStatus.SUCCEEDED),
        failure_rate=share(JobStatus.FAILED),
        timeout_rate=share(JobStatus.TIMED_OUT),
        retry_rate=round(sum(len(j.attempts) > 1 for j in ended) / total, 4) if total else None,
        duration_s=Percentiles.of(
            [
                _epoch(j.finished_at) - _epoch(j.started_at)
                for j in ended
                if j.started_at and j.finished_at
            ]
        ),
        queue_delay_s=Percentiles.of([d for j in recent if (d := queue_delay(j)) is not None]),
        sampled=len(recent),
    )


def queue_delay(job: JobRecord) -> float | None:
    """From when the job could start (made, or its run_at) to its first attempt's start."""
    if not job.attempts and not job.started_at:
        return None
    first = job.attempts[0].started_at if job.attempts else job.started_at
    ready = max(_epoch(job.created_at), float(job.run_at or 0))
    return round(max(0.0, _epoch(first) - ready), 3) if first else None


def _epoch(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC).timestamp()
