"""pagefleet's Lambda functions on the local Lambda service, as infra/ declares them.

Each runs ``functions.<name>.handler:handler`` in its own execution environments, with the
environment it has on AWS: its settings model rendered as ``PAGEFLEET_*`` (the same model
infra/ passes to its LambdaFactory), the Powertools names the factory sets, and the embedded
AWS's endpoint and the function role's local credentials (``devstack.iam.local``: every
call it makes is checked against that role's policies in the synthesized template); nothing
else from the caller's environment but the basics a process needs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings

from devstack.iam.local import LocalIam
from devstack.lambda_env import LambdaFunction
from pagefleet.specs.resources import FUNCTION_ENV
from pagefleet.specs.settings import (
    ApiSettings,
    AuthorizerSettings,
    ChangesSettings,
    CoreSettings,
    LiveSettings,
    WebhookSettings,
    to_env,
)


@dataclass(frozen=True)
class FunctionSpec:
    name: str  # as infra/ names it: functions/<name>/handler.py
    settings_cls: type[BaseSettings]
    timeout_s: float  # as infra/constructs/* set them
    memory_mb: int
    # Local ceiling on environments at once (Lambda would scale much further).
    max_concurrency: int

    @property
    def function_name(self) -> str:
        return f"pagefleet-{self.name.replace('_', '-')}"

    @property
    def principal(self) -> str:
        """Its role, as the local IAM check names it."""
        return f"function/{self.name}"

    @property
    def handler(self) -> str:
        return f"functions.{self.name}.handler:handler"


API = FunctionSpec("api", ApiSettings, timeout_s=29, memory_mb=1024, max_concurrency=4)
AUTHORIZER = FunctionSpec(
    "authorizer", AuthorizerSettings, timeout_s=5, memory_mb=512, max_concurrency=2
)
SWEEPER = FunctionSpec("sweeper", CoreSettings, timeout_s=50, memory_mb=512, max_concurrency=1)
DEAD_LETTERS = FunctionSpec(
    "dead_letters", CoreSettings, timeout_s=30, memory_mb=512, max_concurrency=1
)
JOB_CHANGES = FunctionSpec(
    "job_changes", ChangesSettings, timeout_s=60, memory_mb=512, max_concurrency=1
)
LIVE = FunctionSpec("live", LiveSettings, timeout_s=10, memory_mb=512, max_concurrency=4)
WEBHOOKS = FunctionSpec("webhooks", WebhookSettings, timeout_s=40, memory_mb=512, max_concurrency=2)
SCHEDULER = FunctionSpec("scheduler", CoreSettings, timeout_s=30, memory_mb=512, max_concurrency=2)
SPECS = (API, AUTHORIZER, SWEEPER, DEAD_LETTERS, JOB_CHANGES, SCHEDULER, LIVE, WEBHOOKS)

# What any process needs from its parent's environment (a Lambda has its own versions).
_PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "PYTHONPATH")


def function_env(
    spec: FunctionSpec,
    settings: Mapping[str, Any],
    aws: Mapping[str, str],
    extra: Mapping[str, str] | None = None,
    iam: LocalIam | None = None,
) -> dict[str, str]:
    """The environment of ``spec``: ``settings`` are field values; the model keeps its own."""
    fields = spec.settings_cls.model_fields
    model = spec.settings_cls(**{k: v for k, v in settings.items() if k in fields})
    env = {k: v for k, v in os.environ.items() if k in _PASSTHROUGH}
    # Log levels and the like a developer set for the handlers.
    env.update({k: v for k, v in os.environ.items() if k.startswith("POWERTOOLS_")})
    env.update(aws)
    env.update(iam.env(spec.principal) if iam is not None else {})
    env.update(to_env(model))
    env.setdefault("POWERTOOLS_SERVICE_NAME", spec.function_name)
    env.setdefault("POWERTOOLS_METRICS_NAMESPACE", "pagefleet")
    env.update(FUNCTION_ENV)  # as deployed (infra/constructs/lambda_factory.py)
    env.update(extra or {})
    return env


def local_functions(
    settings: Mapping[str, Any],
    aws: Mapping[str, str],
    *,
    log_dir: Path,
    extra_env: Mapping[str, str] | None = None,
    iam: LocalIam | None = None,
) -> dict[str, LambdaFunction]:
    """Every function of the stack, by its infra/ name (``api``, ``authorizer``, ...)."""
    return {
        spec.name: LambdaFunction(
            spec.function_name,
            spec.handler,
            timeout_s=spec.timeout_s,
            memory_mb=spec.memory_mb,
            max_concurrency=spec.max_concurrency,
            env=function_env(spec, settings, aws, extra_env, iam),
            log_dir=log_dir,
        )
        for spec in SPECS
    }
