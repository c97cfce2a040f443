"""Every minute (EventBridge): re-enqueue lost jobs, take back dead leases, expire deadlines."""

from __future__ import annotations

import dataclasses
from typing import Any

from aws_lambda_powertools import Logger

from pagefleet.jobs.recovery import sweep
from pagefleet.jobs.service import JobServices
from pagefleet.runtime import RUNTIME
from pagefleet.settings import CoreSettings

logger = Logger(service="pagefleet-sweeper")


def services() -> JobServices:
    return RUNTIME.job_services(RUNTIME.settings(CoreSettings))


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    report = dataclasses.asdict(sweep(services()))
    logger.info("sweep", extra=report)
    return report
