"""Lambda SQS event shape, as AWS delivers a batch from an event source mapping."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any


def sqs_event(
    bodies: list[str], *, receive_count: int = 5, queue: str = "pagefleet-jobs-standard-dlq"
) -> dict[str, Any]:
    records = []
    for body in bodies:
        records.append(
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "AQEB" + uuid.uuid4().hex,
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": str(receive_count),
                    "SentTimestamp": "1796018400000",
                    "SenderId": "AIDAEXAMPLE",
                    "ApproximateFirstReceiveTimestamp": "1796018400100",
                },
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(body.encode()).hexdigest(),  # noqa: S324 - SQS's own checksum
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{queue}",
                "awsRegion": "us-east-1",
            }
        )
    return {"Records": records}
