"""The settings the local stack's functions and workers run with, from what it provisioned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devstack.live_parts import LiveParts
from devstack.provision import Provisioned
from pagefleet.specs.settings import ApiSettings, WorkerSettings

# A short long-poll keeps Ctrl-C snappy: a worker drains after its current receive.
LOCAL_POLL_WAIT_S = 2


@dataclass(frozen=True)
class LocalSettings:
    core: dict[str, Any]  # what every function and worker shares (devstack.functions)
    api: ApiSettings
    worker: WorkerSettings


def local_settings(
    provisioned: Provisioned, live: LiveParts, *, concurrency: int, job_role_arn: str
) -> LocalSettings:
    core: dict[str, Any] = {
        **provisioned.store_settings(),
        "stage": "local",
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
