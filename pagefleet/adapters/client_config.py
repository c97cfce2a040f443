"""What every boto3 client of ours is configured with beyond its own retries and pool.

Client-side parameter validation: botocore checks each request against the service model
before sending it, ~0.1 ms of CPU a call, for what AWS checks again on arrival. A worker's
plain job makes ~17 calls, and the checks were ~5 % of its Python (bench/worker_python.py
--stack). They are off unless ``PAGEFLEET_AWS_VALIDATE_PARAMETERS=1``, which the test suite
sets for itself and every process it starts (tests/conftest.py) and the local stack for its
processes (devstack.constants.aws_env), so a request our code builds wrongly still fails
here, as ``ParamValidationError``, where the embedded AWS might have accepted it.

Sessions: all of ours (``aws_session``) share what botocore loaded of its data, once per
process. A session of its own parses again the endpoint table and each service model it
makes a client of, and its clients keep their models for their life: a worker with a job
role makes a session per tenant. What is loaded is also smaller: plain dicts, and service
models without their documentation, which only ``help()`` and botocore's doc generator
read. A worker's three clients (DynamoDB, SQS, S3) held 14.2 MB of botocore data, now 7.3.

Transaction conflicts: a DynamoDB write that met a transaction under way on its item
(``TransactionConflictException``) wrote nothing, and botocore's retries pass it by; each
client of our sessions sends it again, ``CONFLICT_TRIES`` tries in all
(docs/decisions.md, 2026-12-06, "Transactions that meet").
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

import boto3.session
import botocore.session
from botocore.config import Config
from botocore.loaders import JSONFileLoader, Loader

from pagefleet.adapters.endpoint_table import services_we_call
from pagefleet.backoff import Backoff, Jitter

VALIDATE_PARAMETERS_ENV = "PAGEFLEET_AWS_VALIDATE_PARAMETERS"
# A transaction is under way for tens of milliseconds: a write that met one is sent again,
# six tries in all, the last 0.31-0.62 s after the first (spread, never much sooner).
CONFLICT_TRIES = 6
CONFLICT_BACKOFF = Backoff(0.02, 0.32, Jitter.EQUAL)


def with_validation_setting(config: Config) -> Config:
    """``config`` with client-side parameter validation as the environment says (read when
    the client is made)."""
    validate = os.environ.get(VALIDATE_PARAMETERS_ENV) == "1"
    return config.merge(Config(parameter_validation=validate))


# Where botocore looks for a data file, in its order.
_SUFFIXES = ((".json", open), (".json.gz", gzip.open))


class CompactFileLoader(JSONFileLoader):
    """botocore's data files read as plain dicts (in the file's order, as the OrderedDicts
    botocore reads them into): ~40 % less memory, parsed ~4x faster; service models
    without their documentation texts (of the service, its operations, its shapes and
    their members); and the endpoint table holding only the services we call
    (``pagefleet.adapters.endpoint_table``). The documentation of a model's client context
    parameters is kept: botocore reads it."""

    def load_file(self, file_path: str) -> Any:
        for suffix, opener in _SUFFIXES:
            full_path = file_path + suffix
            if os.path.isfile(full_path):

                def read(path: str = full_path, opener: Any = opener) -> Any:
                    with opener(path, "rb") as fp:
                        return json.loads(fp.read().decode("utf-8"))

                data = read()
                name = os.path.basename(file_path)
                if name == "service-2":
                    drop_documentation(data)
                elif name == "endpoints":
                    data = services_we_call(data, read_again=read)
                return data
        return None


def drop_documentation(model: dict[str, Any]) -> None:
    """Remove a service model's documentation texts, in place."""
    model.pop("documentation", None)
    for operation in model.get("operations", {}).values():
        operation.pop("documentation", None)
    for shape in model.get("shapes", {}).values():
        shape.pop("documentation", None)
        for member in shape.get("members", {}).values():
            member.pop("documentation", None)


class SharedLoader(Loader):
    """botocore's loader, reading files with ``CompactFileLoader`` and keeping what it loaded
    in ``cache``, which the process's loaders of one data path share. (A loader per session
    over one cache, not one loader: boto3 adds its data path to a session's loader's search
    paths each time it makes a session.)"""

    FILE_LOADER_CLASS = CompactFileLoader

    def __init__(self, cache: dict[Any, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cache = cache  # where botocore's instance_cache keeps what a loader loaded


# Per data path (AWS_DATA_PATH, None for botocore's own): what its loaders loaded.
_caches: dict[str | None, dict[Any, Any]] = {}


def aws_session(core: botocore.session.Session | None = None) -> boto3.session.Session:
    """A new boto3 session (credentials, region and config read as boto3's own; over
    ``core`` when given) whose botocore data comes from what the process's other sessions
    already loaded."""
    core = core or botocore.session.get_session()
    path = core.get_config_variable("data_path")
    cache = _caches.setdefault(path, {})
    # The search paths as botocore's create_loader reads AWS_DATA_PATH.
    extra = None
    if path is not None:
        extra = [os.path.expanduser(os.path.expandvars(p)) for p in path.split(os.pathsep)]
    core.register_component("data_loader", SharedLoader(cache, extra_search_paths=extra))
    # A needs-retry handler answers the wait before the next try (the stubs say None).
    core.register("needs-retry.dynamodb", after_a_conflict, unique_id=_CONFLICT_HANDLER)  # type: ignore[arg-type]
    return boto3.session.Session(botocore_session=core)


_CONFLICT_HANDLER = "pagefleet-transaction-conflicts"


def after_a_conflict(response: Any, attempts: int, **_: Any) -> float | None:
    """botocore's ``needs-retry`` hook: the wait before a write that met a transaction is
    sent again (None: not ours to retry; botocore's own retries decide)."""
    if response is None or attempts >= CONFLICT_TRIES:
        return None
    if response[1].get("Error", {}).get("Code") != "TransactionConflictException":
        return None
    return CONFLICT_BACKOFF.delay(attempts)
