"""The runtime's cache and AWS clients: what every builder module builds on.

Each thing is built once per process, on first use (never at import), under one lock; the
builders (``tenants``, ``jobs``, ``notify``, each over the one before) ask ``_once`` /
``_per`` for it. ``reset()`` forgets everything built against another endpoint.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import boto3.session
from botocore.config import Config

from pagefleet.adapters.client_config import aws_session, with_validation_setting
from pagefleet.adapters.faults import FaultInjector

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sqs import SQSClient
    from pydantic_settings import BaseSettings


# Standard retry mode backs off on throttling; adaptive would also rate-limit the client.
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=32)
# S3 presigned URLs must be SigV4: regions opened since 2014 (ap-south-1 among them) refuse
# botocore's legacy default for S3.
_S3_CONFIG = _CONFIG.merge(Config(signature_version="s3v4"))
# On AWS they also name the bucket's regional host (<bucket>.s3.<region>.amazonaws.com): the
# global one answers a bucket outside us-east-1 with a 307 to it for hours after the
# bucket's creation, and a redirected presigned URL fails its signature. Only without an
# endpoint override: on the embedded AWS, botocore's path style on that endpoint stays.
_S3_REGIONAL_CONFIG = _S3_CONFIG.merge(
    Config(s3={"addressing_style": "virtual", "us_east_1_regional_endpoint": "regional"})
)
# WebSocket posts wait on a socket far away: a short timeout, standard retries.
_MANAGEMENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=3,
    read_timeout=5,
    max_pool_connections=32,
)

# A string bound: pydantic_settings is imported with the first settings class, not here.
S = TypeVar("S", bound="BaseSettings")
T = TypeVar("T")


class RuntimeBase:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._built: dict[Any, Any] = {}
        self._faults: FaultInjector | None = None
        self._session: boto3.session.Session | None = None

    def reset(self) -> None:
        """Forget every client, adapter and settings object built so far."""
        with self._lock:
            self._built.clear()
            self._faults = None
            self._session = None

    def _once(self, key: Any, build: Callable[[], T]) -> T:
        with self._lock:
            if key not in self._built:
                self._built[key] = build()
            return self._built[key]

    def _per(self, name: str, settings: BaseSettings, build: Callable[[], T]) -> T:
        """Built once per process for these settings."""
        return self._once((name, settings.model_dump_json()), build)

    # --- settings and clients -------------------------------------------------------------
    def settings(self, cls: type[S]) -> S:
        """The runtime's settings, read from the environment and validated once."""
        return self._once(("settings", cls), cls)

    @overload
    def client(self, service: Literal["dynamodb"]) -> DynamoDBClient: ...
    @overload
    def client(self, service: Literal["sqs"]) -> SQSClient: ...
    @overload
    def client(self, service: Literal["s3"]) -> S3Client: ...
    @overload
    def client(self, service: Literal["secretsmanager"]) -> SecretsManagerClient: ...
    @overload
    def client(self, service: str) -> Any: ...

    def client(self, service: str) -> Any:
        """One boto3 client per service per process (clients are thread-safe).

        All made from one session (built under the lock, as sessions are not thread-safe),
        whose botocore data every session of the process shares
        (``pagefleet.adapters.client_config.aws_session``).
        """

        def build() -> Any:
            config = _CONFIG
            if service == "s3":
                overridden = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get(
                    "AWS_ENDPOINT_URL"
                )
                config = _S3_CONFIG if overridden else _S3_REGIONAL_CONFIG
            if self._session is None:
                self._session = aws_session()
            config = with_validation_setting(config)
            made = self._session.client(service, config=config)  # type: ignore[call-overload]
            if self._faults is not None:
                self._faults.attach(made)
            return made

        return self._once(("client", service), build)

    def management_client(self, endpoint: str) -> Any:
        """The ``@connections`` client of a WebSocket stage (its callback URL)."""
        return self._once(
            ("management", endpoint),
            lambda: aws_session().client(
                "apigatewaymanagementapi",
                endpoint_url=endpoint,
                config=with_validation_setting(_MANAGEMENT_CONFIG),
            ),
        )

    def inject_faults(self, rate: float) -> FaultInjector | None:
        """Chaos testing only: fail ``rate`` of this process's AWS calls the way AWS does."""
        if rate <= 0:
            return None
        with self._lock:
            self._faults = FaultInjector(rate=rate)
            # Clients (and what holds them) made from now on carry the injector.
            for key in [k for k in self._built if k[0] != "settings"]:
                del self._built[key]
            return self._faults
