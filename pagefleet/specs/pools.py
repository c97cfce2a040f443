"""What each worker pool offers, and which pool a job's requirements route it to.

A deployment publishes its pools' offers (``CoreSettings.pools``: memory, architecture,
Spot, egress, region, isolation, from the stage's pool settings), and a job says what it
needs instead of naming a pool: ``"requires": {"memory_mib": 6000}``. The API routes it to
the smallest pool that has everything it asks for, or refuses it with a 422 that names every
pool and what each lacks (``route``). A job that names its pool (``"pool": "heavy"``) with
requirements gets that pool only if it meets them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pagefleet.ids import POOL_NAME

# nat: the stage's NAT gateways (their fixed addresses, shared by the stage's NAT pools);
# public: the task's own public IP (changes with every task); fixed_ip: the pool's own NAT
# gateway and Elastic IP (one address for that pool only, for sites that allow-list it);
# proxy: through the HTTP proxy in the pool's Secrets Manager secret.
Egress = Literal["nat", "public", "fixed_ip", "proxy"]
# task: one job per task (one slot) and a fresh browser for each job, so no other job shares
# its memory, processes or browser profile.
Isolation = Literal["shared", "task"]
POOL_NAME_PATTERN = POOL_NAME  # part of its queues' keys and its resources' ids


class PoolOffer(BaseModel):
    """One pool as jobs see it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=POOL_NAME_PATTERN)
    memory_mib: int = Field(description="memory of a task")
    slots: int = Field(description="jobs a task runs at once")
    architecture: Literal["x86_64", "arm64"]
    spot: bool = False
    egress: Egress = Field(description="how its tasks reach sites (see Egress)")
    region: str | None = Field(default=None, description="None: the deployment's region")
    isolation: Isolation = "shared"


class PoolProxy(BaseModel):
    """A pool's egress proxy, the JSON its Secrets Manager secret holds: every browser of
    the pool reaches sites through it (after the worker's own egress checks)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(min_length=1, max_length=253)
    port: int = Field(ge=1, le=65535)
    username: str | None = Field(default=None, repr=False)
    password: str | None = Field(default=None, repr=False)


class Requirements(BaseModel):
    """What a job needs from the pool that runs it (any left out: whatever the pool has)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    memory_mib: int | None = Field(
        default=None, ge=1, description="at least this much memory in the task (MiB)"
    )
    region: str | None = Field(
        default=None,
        pattern=r"^[a-z]{2}(-[a-z]+)+-\d$",
        description="the AWS region the browser runs in, e.g. ap-south-1",
    )
    egress: Egress | None = Field(
        default=None,
        description=(
            "nat: the stage's NAT gateways' fixed addresses; public: the task's own; "
            "fixed_ip: the pool's own Elastic IP; proxy: the pool's HTTP proxy"
        ),
    )
    isolation: Isolation | None = Field(
        default=None,
        description="task: no other job in the same task, and a fresh browser for this job",
    )
    spot: bool | None = Field(
        default=None, description="false: never on Fargate Spot (may be stopped at 2 minutes)"
    )


class NoPoolFits(ValueError):
    """No pool has what the job requires: ``reasons`` says what each pool lacks."""

    def __init__(self, reasons: dict[str, str]) -> None:
        self.reasons = reasons
        listed = "; ".join(f"{pool}: {why}" for pool, why in reasons.items())
        super().__init__(f"no pool has what the job requires ({listed})")


def shortfall(offer: PoolOffer, needs: Requirements, home_region: str | None) -> str | None:
    """What ``offer`` lacks for ``needs``, or None when it has everything."""
    lacks = []
    if needs.memory_mib is not None and offer.memory_mib < needs.memory_mib:
        lacks.append(f"{offer.memory_mib} MiB of memory, under {needs.memory_mib}")
    region = offer.region or home_region
    if needs.region is not None and region != needs.region:
        lacks.append(f"runs in {region or 'the deployment region'}, not {needs.region}")
    if needs.egress is not None and offer.egress != needs.egress:
        lacks.append(f"egress {offer.egress}, not {needs.egress}")
    if needs.isolation is not None and offer.isolation != needs.isolation:
        lacks.append(f"isolation {offer.isolation}, not {needs.isolation}")
    if needs.spot is False and offer.spot:
        lacks.append("runs on Fargate Spot")
    return ", ".join(lacks) or None


def route(
    needs: Requirements,
    offers: tuple[PoolOffer, ...],
    *,
    home_region: str | None = None,
    named: str | None = None,
    allowed: frozenset[str] | None = None,
) -> str:
    """The pool for a job: ``named`` if it meets ``needs``, else the smallest (memory, then
    slots) pool that does among those ``allowed`` (None: every pool). Raises NoPoolFits."""
    reasons: dict[str, str] = {}
    fitting = []
    for offer in offers:
        if named is not None and offer.name != named:
            continue
        if allowed is not None and offer.name not in allowed:
            reasons[offer.name] = "not allowed for this tenant"
            continue
        lacks = shortfall(offer, needs, home_region)
        if lacks:
            reasons[offer.name] = lacks
        else:
            fitting.append(offer)
    if named is not None and not any(o.name == named for o in offers):
        reasons[named] = "no such pool in this deployment"
    if not fitting:
        raise NoPoolFits(reasons)
    return min(fitting, key=lambda o: (o.memory_mib, o.slots, o.name)).name
