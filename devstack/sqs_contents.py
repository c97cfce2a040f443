"""SQS's character set for a message: the embedded AWS refuses what SQS refuses.

SQS takes a message of "only XML, JSON, and unformatted text", of these characters:
"#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF", and "if a
message contains characters outside the allowed set, Amazon SQS rejects the message and
returns an InvalidMessageContents error"
(https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html;
earlier editions said it replaces them with U+FFFD: either way the message is not the one
sent). A SendMessageBatch answers each entry on its own, so such an entry is in its
``Failed`` list and the others are sent. moto stores any text, so a message carrying a
user's text (a job's preview: its options) passed here and failed on AWS.

The rule is ``StrictRules.sqs_message_characters`` (on by default; installed by
``devstack.strict_aws.enforce``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Everything SQS does not take in a message body (a lone surrogate included).
_REFUSED = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
CODE = "InvalidMessageContents"
MESSAGE = "Invalid binary character in the message body"


def refused_character(body: str) -> str | None:
    """The first character of ``body`` SQS refuses, or None."""
    found = _REFUSED.search(body)
    return found.group() if found else None


def refuse_outside_characters(on: Callable[[], bool]) -> None:
    """From now on, while ``on()``: a message with a character SQS refuses is not sent."""
    from moto.sqs.exceptions import SQSException
    from moto.sqs.models import SQSBackend

    class InvalidMessageContents(SQSException):
        def __init__(self) -> None:
            super().__init__(CODE, MESSAGE)

    send = SQSBackend.send_message
    send_batch = SQSBackend.send_message_batch

    def send_message(self: Any, queue_name: str, message_body: str, *a: Any, **kw: Any) -> Any:
        if on() and refused_character(message_body) is not None:
            raise InvalidMessageContents()
        return send(self, queue_name, message_body, *a, **kw)

    def send_message_batch(self: Any, queue_name: str, entries: dict[str, Any]) -> Any:
        if not on():
            return send_batch(self, queue_name, entries)
        bad = [k for k, e in entries.items() if refused_character(e["MessageBody"]) is not None]
        if not bad:
            return send_batch(self, queue_name, entries)
        kept = {k: e for k, e in entries.items() if k not in bad}
        messages, failed = send_batch(self, queue_name, kept) if kept else ([], [])
        refusals = [
            {"Id": entries[k]["Id"], "SenderFault": True, "Code": CODE, "Message": MESSAGE}
            for k in bad
        ]
        return messages, [*failed, *refusals]

    SQSBackend.send_message = send_message  # type: ignore[method-assign]
    SQSBackend.send_message_batch = send_message_batch  # type: ignore[method-assign]
