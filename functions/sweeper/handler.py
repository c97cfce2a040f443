"""Every minute (EventBridge): re-enqueue lost jobs, take back dead leases, expire deadlines."""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any

from aws_lambda_powertools import Logger

from pagefleet.aws import job_services
from pagefleet.jobs.recovery import sweep
from pagefleet.jobs.service import JobServices
from pagefleet.settings import CoreSettings

logger = Logger(service="pagefleet-sweeper")


@lru_cache(maxsize=1)
def services() -> JobServices:
    return job_services(CoreSettings())


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    report = dataclasses.asdict(sweep(services()))
    logger.info("sweep", extra=report)
    return report
