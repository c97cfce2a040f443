"""An offline replay of an ended job (``POST /v1/jobs/{id}/replay``).

The replay is a new job with the original's steps, inputs and options, run against the
original's recorded traffic only (its ``har.zip``): the worker answers every request from
the HAR and aborts whatever the HAR lacks (browser_task.run.routing), so a failure can be
reproduced after the site changed or went away. Its ``{{secrets.NAME}}`` render as ``***``,
what the HAR holds in their place (browser_task.browser.har): a replay never reads the
tenant's secrets. One attempt, no schedule, no parents, no notification: it is a look at
what happened, not a new run of the work. The two jobs link both ways: the replay's
``request.replay`` names the original, the original's ``replays`` lists its replays.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pagefleet.errors import InvalidField, JobNotEnded
from pagefleet.jobs.models import JobRequest, ReplayOf
from pagefleet.jobs.record import JobRecord

HAR_ARTIFACT = "har.zip"


class ReplayRequest(BaseModel):
    """``POST /v1/jobs/{id}/replay``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    offline: bool = Field(
        description="true: answered from the job's recorded traffic (har.zip) only"
    )

    @field_validator("offline")
    @classmethod
    def _offline_only(cls, offline: bool) -> bool:
        if not offline:
            raise ValueError("only offline replays exist: set offline to true")
        return offline


def offline_request(job: JobRecord) -> JobRequest:
    """The replay's request; raises when ``job`` cannot be replayed (409 / 422)."""
    if not job.status.is_final:
        raise JobNotEnded(
            f"job {job.job_id} is {job.status.value}: only a job that ended can be replayed",
            status=job.status.value,
        )
    if job.request.session is not None:
        raise InvalidField("a browser session cannot be replayed", field="job_id")
    hars = [a for a in job.artifacts if a.name == HAR_ARTIFACT]
    if not hars:
        raise InvalidField(
            f"job {job.job_id} has no {HAR_ARTIFACT}: submit it with options.har "
            '(true or "on_failure") to replay it offline',
            field="har",
        )
    har = max(hars, key=lambda a: a.attempt or 0)  # the last attempt's traffic
    return job.request.model_copy(
        update={
            "replay": ReplayOf(job_id=job.job_id, har_key=har.key),
            "max_attempts": 1,
            "notify": None,
            "depends_on": [],
            "delay_seconds": None,
            "run_at": None,
            "deadline": None,
            "monitor": None,
        }
    )
