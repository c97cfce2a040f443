"""The settings the local stack's functions and workers run with, from what it provisioned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devstack.live_parts import LiveParts
from devstack.provision import Provisioned
from pagefleet.specs.pools import PoolOffer
from pagefleet.specs.settings import ApiSettings, WorkerSettings, env_name

# A short long-poll keeps Ctrl-C snappy: a worker drains after its current receive.
LOCAL_POLL_WAIT_S = 2
# What the local pools offer a job's ``requires``: the dev stage's shapes (infra/config.py),
# so a job routed locally goes where it would on a dev deployment.
LOCAL_POOLS = (
    PoolOffer(name="standard", memory_mib=2048, slots=2, architecture="arm64", egress="public"),
    PoolOffer(
        name="heavy",
        memory_mib=4096,
        slots=1,
        architecture="arm64",
        egress="public",
        isolation="task",
    ),
)


def pool_worker_env(offer: PoolOffer) -> dict[str, str]:
    """What makes a local worker ``offer``'s: its pool, one slot, its isolation."""
    return {
        env_name(WorkerSettings, "pool"): offer.name,
        env_name(WorkerSettings, "concurrency"): "1",
        env_name(WorkerSettings, "isolation"): offer.isolation,
    }


@dataclass(frozen=True)
class LocalSettings:
    core: dict[str, Any]  # what every function and worker shares (devstack.functions)
    api: ApiSettings
    worker: WorkerSettings


def local_settings(
    provisioned: Provisioned,
    live: LiveParts,
    *,
    concurrency: int,
    job_role_arn: str,
    console_url: str,
    pools: tuple[PoolOffer, ...] = LOCAL_POOLS,
) -> LocalSettings:
    core: dict[str, Any] = {
        **provisioned.store_settings(),
        "stage": "local",
        "pools": pools,
        "console_url": console_url,  # the stream reader's notifications link to it
        **live.settings(provisioned),
        **provisioned.scheduler_settings(),
    }
    worker = WorkerSettings(
        **core,
        concurrency=concurrency,
        allow_loopback=True,
        poll_wait_seconds=LOCAL_POLL_WAIT_S,
        job_role_arn=job_role_arn,  # per tenant, as on AWS
    )
    return LocalSettings(core=core, api=ApiSettings(**core), worker=worker)
