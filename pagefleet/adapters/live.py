"""API Gateway's management API (``@connections``) for the WebSocket stage.

The endpoint is the stage's callback URL (``https://<api id>.execute-api.<region>
.amazonaws.com/<stage>``; the local stack serves its own on loopback), passed explicitly:
the management API has no regional default endpoint.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from pagefleet.backoff import Backoff, Jitter

if TYPE_CHECKING:
    from mypy_boto3_apigatewaymanagementapi import ApiGatewayManagementApiClient

_GONE = {"GoneException", "410"}
_THROTTLED = {"LimitExceededException", "TooManyRequestsException", "429"}
# A throttled post is tried again soon: a live viewer's frame is worth little once late.
POST_BACKOFF = Backoff(0.1, 0.8, Jitter.NONE)


def _code(exc: ClientError) -> str:
    error = exc.response.get("Error", {}).get("Code", "")
    status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return error if error else status


class ApiGatewayPoster:
    """``ConnectionPoster`` over ``apigatewaymanagementapi``."""

    def __init__(self, client: ApiGatewayManagementApiClient, *, retries: int = 3) -> None:
        self._client = client
        self._retries = retries

    def post(self, connection_id: str, data: bytes) -> bool:
        for attempt in range(self._retries + 1):
            try:
                self._client.post_to_connection(ConnectionId=connection_id, Data=data)
                return True
            except ClientError as exc:
                code = _code(exc)
                if (
                    code in _GONE
                    or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 410
                ):
                    return False
                if code in _THROTTLED and attempt < self._retries:
                    time.sleep(POST_BACKOFF.delay(attempt + 1))
                    continue
                raise
        return True  # not reached

    def close(self, connection_id: str) -> None:
        try:
            self._client.delete_connection(ConnectionId=connection_id)
        except ClientError as exc:
            if (
                _code(exc) not in _GONE
                and exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 410
            ):
                raise
