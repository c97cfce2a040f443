"""``monitor``: what a run is compared with its baseline on (tracked results, a screenshot)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pagefleet.ids import is_ulid

DEFAULT_THRESHOLD = 0.01


class Track(BaseModel):
    """A tracked result: a list of records matched by ``key`` (a field of each record), or
    any other value compared whole (before -> after)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="the field that names a record (e.g. sku); omitted: records are matched whole",
    )


class Monitor(BaseModel):
    """``monitor``: compare each run with the last good one (or a pinned baseline)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    track: dict[str, Track] = Field(
        default_factory=dict,
        max_length=20,
        description='result name -> how its records are matched, e.g. {"products": {"key": "sku"}}',
    )
    screenshot: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="the screenshot step (its artifact name) compared pixel by pixel",
    )
    mask: list[str] = Field(
        default_factory=list,
        max_length=20,
        description="selectors hidden in the tracked screenshot (clocks, ads, carousels)",
    )
    threshold: float = Field(
        default=DEFAULT_THRESHOLD,
        ge=0,
        le=1,
        description="changed-pixel ratio above which the screenshot counts as changed",
    )
    baseline_job_id: str | None = Field(
        default=None,
        description=(
            "compare with this earlier job; omitted: a schedule's pinned baseline or its last "
            "successful run"
        ),
    )

    @field_validator("mask")
    @classmethod
    def _selectors(cls, selectors: list[str]) -> list[str]:
        for selector in selectors:
            if not 1 <= len(selector) <= 2000:
                raise ValueError("a mask selector is 1 to 2000 characters")
        return selectors

    @field_validator("baseline_job_id")
    @classmethod
    def _job_id(cls, job_id: str | None) -> str | None:
        if job_id is not None and not is_ulid(job_id):
            raise ValueError(f"{job_id!r} is not a job id")
        return job_id

    @model_validator(mode="after")
    def _compares_something(self) -> Monitor:
        if not self.track and self.screenshot is None:
            raise ValueError("monitor needs track or screenshot")
        if self.mask and self.screenshot is None:
            raise ValueError("mask hides parts of the tracked screenshot: name it in screenshot")
        return self
