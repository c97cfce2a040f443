"""A job says what it needs and goes to the smallest pool that has it, or is refused naming
every pool and what each lacks (pagefleet.specs.pools)."""

from __future__ import annotations

import pytest

from pagefleet.specs.pools import NoPoolFits, PoolOffer, Requirements, route

STANDARD = PoolOffer(name="standard", memory_mib=4096, slots=6, architecture="arm64", egress="nat")
HEAVY = PoolOffer(
    name="heavy", memory_mib=8192, slots=1, architecture="arm64", egress="nat", isolation="task"
)
SPOT = PoolOffer(
    name="cheap", memory_mib=4096, slots=6, architecture="x86_64", egress="nat", spot=True
)
MUMBAI = PoolOffer(
    name="mumbai",
    memory_mib=4096,
    slots=6,
    architecture="arm64",
    egress="nat",
    region="ap-south-1",
)
POOLS = (STANDARD, HEAVY, SPOT, MUMBAI)


def test_the_smallest_pool_with_everything_asked_for_runs_the_job() -> None:
    assert route(Requirements(), POOLS, home_region="us-east-1") == "cheap"  # name breaks ties
    assert route(Requirements(memory_mib=6000), POOLS, home_region="us-east-1") == "heavy"
    assert route(Requirements(isolation="task"), POOLS, home_region="us-east-1") == "heavy"
    never_spot = Requirements(spot=False, region="us-east-1")
    assert route(never_spot, POOLS, home_region="us-east-1") == "standard"
    assert route(Requirements(region="ap-south-1"), POOLS, home_region="us-east-1") == "mumbai"


def test_none_fits_names_each_pool_and_what_it_lacks() -> None:
    with pytest.raises(NoPoolFits) as refused:
        route(Requirements(memory_mib=10_000, egress="public"), POOLS, home_region="us-east-1")
    assert set(refused.value.reasons) == {"standard", "heavy", "cheap", "mumbai"}
    assert (
        refused.value.reasons["heavy"] == "8192 MiB of memory, under 10000, egress nat, not public"
    )
    assert "standard: 4096 MiB of memory, under 10000" in str(refused.value)


def test_a_named_pool_must_have_what_the_job_requires() -> None:
    assert route(Requirements(memory_mib=6000), POOLS, named="heavy") == "heavy"
    with pytest.raises(NoPoolFits) as refused:
        route(Requirements(memory_mib=6000), POOLS, named="standard")
    assert refused.value.reasons == {"standard": "4096 MiB of memory, under 6000"}
    with pytest.raises(NoPoolFits, match="gpu: no such pool"):
        route(Requirements(), POOLS, named="gpu")


def test_pools_a_tenant_may_not_use_are_named_as_such() -> None:
    allowed = frozenset({"standard"})
    with pytest.raises(NoPoolFits) as refused:
        route(Requirements(memory_mib=6000), POOLS, allowed=allowed)
    assert refused.value.reasons["heavy"] == "not allowed for this tenant"
    assert route(Requirements(), POOLS, allowed=allowed) == "standard"


def test_requirements_are_checked_as_the_api_reads_them() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="memory_mib"):
        Requirements.model_validate({"memory_mib": 0})
    with pytest.raises(ValidationError, match="region"):
        Requirements.model_validate({"region": "the moon"})
    with pytest.raises(ValidationError, match="gpus"):
        Requirements.model_validate({"gpus": 1})
