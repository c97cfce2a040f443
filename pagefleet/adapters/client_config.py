"""What every boto3 client of ours is configured with beyond its own retries and pool.

Client-side parameter validation: botocore checks each request against the service model
before sending it, ~0.1 ms of CPU a call, for what AWS checks again on arrival. A worker's
plain job makes ~17 calls, and the checks were ~5 % of its Python (bench/worker_python.py
--stack). They are off unless ``PAGEFLEET_AWS_VALIDATE_PARAMETERS=1``, which the test suite
sets for itself and every process it starts (tests/conftest.py) and the local stack for its
processes (devstack.constants.aws_env), so a request our code builds wrongly still fails
here, as ``ParamValidationError``, where the embedded AWS might have accepted it.
"""

from __future__ import annotations

import os

from botocore.config import Config

VALIDATE_PARAMETERS_ENV = "PAGEFLEET_AWS_VALIDATE_PARAMETERS"


def with_validation_setting(config: Config) -> Config:
    """``config`` with client-side parameter validation as the environment says (read when
    the client is made)."""
    validate = os.environ.get(VALIDATE_PARAMETERS_ENV) == "1"
    return config.merge(Config(parameter_validation=validate))
