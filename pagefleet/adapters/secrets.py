"""``{{secrets.NAME}}`` from AWS Secrets Manager, read by the worker only.

A tenant's secret NAME lives at ``pagefleet/<stage>/<tenant>/NAME`` (SecretString), so IAM
can scope the worker to ``pagefleet/<stage>/*`` and a workflow can only reach secrets of
the tenant that submitted it (the tenant comes from the job record, never the workflow).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pagefleet.errors import SecretsUnavailable, SecretUnreadable

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient


def secret_id(stage: str, tenant_id: str, name: str) -> str:
    return f"pagefleet/{stage}/{tenant_id}/{name}"


# Answers that mean "the secret is not there / not ours"; anything else may be transient.
_MISSING = {"ResourceNotFoundException"}
_PERMANENT = {"AccessDeniedException", "DecryptionFailure", "InvalidRequestException"}


class SecretsManagerResolver:
    """A ``SecretStore`` over Secrets Manager. Values are never logged or cached here:
    the executor resolves a job's secrets once, up front, and keeps them for that job only."""

    def __init__(self, client: SecretsManagerClient, stage: str) -> None:
        self._client = client
        self._stage = stage

    async def resolve(self, tenant_id: str, name: str) -> str | None:
        return await asyncio.to_thread(self._get, tenant_id, name)

    def _get(self, tenant_id: str, name: str) -> str | None:
        try:
            answer = self._client.get_secret_value(SecretId=secret_id(self._stage, tenant_id, name))
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
            if code in _MISSING:
                return None
            if code in _PERMANENT:
                raise SecretUnreadable(
                    f"secret {name} cannot be read ({code}); check its policy and key"
                ) from None
            raise SecretsUnavailable(
                f"reading secret {name} failed ({code or type(exc).__name__})"
            ) from None
        value = answer.get("SecretString")
        if value is None:
            raise SecretUnreadable(f"secret {name} holds binary data; store it as a string")
        return str(value)
