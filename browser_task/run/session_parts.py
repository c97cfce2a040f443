"""A browser session's answer kept within its bounds: what is too large goes to S3 as a part.

An answer travels on an SQS message (256 KiB at most) and is kept in its command's DynamoDB
record (400 KB at most). Extracted data over ``RESULT_INLINE_MAX_BYTES`` and a whole ARIA
snapshot longer than the inline one (``ARIA_MAX_CHARS``, cut and flagged ``aria_truncated``)
are uploaded as the job's artifacts (masked as the inline answer is) and referenced by key,
size and sha256; the API answers each with a short presigned link. So are the files a
command's steps made (a download, a named screenshot): the agent reaches them by link.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from browser_task.errors import JobFailure
from browser_task.run.context import RunContext
from pagefleet.browsing.models import ARIA_MAX_CHARS, RESULT_INLINE_MAX_BYTES, Answer, PartRef
from pagefleet.jobs.record_size import json_bytes
from pagefleet.specs.resources import DEBUG


class AnswerParts:
    """Numbers each part (one artifact name per part of the session) and uploads it."""

    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._count = 0

    async def kept(self, what: str, data: bytes, content_type: str, suffix: str) -> PartRef:
        self._count += 1
        name = f"session-part-{self._count:04d}-{what}.{suffix}"
        self._ctx.artifacts.add(name, data, content_type, retention=DEBUG)
        artifact = await self._ctx.artifacts.uploaded(name)
        return PartRef(
            key=artifact.key,
            sha256=hashlib.sha256(data).hexdigest(),
            bytes=len(data),
            content_type=content_type,
        )

    async def made(self, before: set[str]) -> dict[str, PartRef]:
        """The artifacts added since ``before`` (the names there were), once uploaded; one
        whose upload failed is left out (the job's end reports that failure)."""
        out: dict[str, PartRef] = {}
        for name in self._ctx.artifacts.names:
            if name in before:
                continue
            with contextlib.suppress(JobFailure):
                artifact = await self._ctx.artifacts.uploaded(name)
                out[name] = PartRef(
                    key=artifact.key,
                    sha256=artifact.sha256,
                    bytes=artifact.size,
                    content_type=artifact.content_type,
                )
        return out

    async def bounded(self, answer: Answer, whole_tree: str | None) -> Answer:
        """``answer`` with its large parts moved out; ``whole_tree``: the masked ARIA
        snapshot before it was cut (None when none was taken)."""
        parts = dict(answer.parts)
        update: dict[str, object] = {}
        if json_bytes(answer.result) > RESULT_INLINE_MAX_BYTES:
            data = json.dumps(answer.result, ensure_ascii=False).encode()
            parts["result"] = await self.kept("result", data, "application/json", "json")
            update["result"] = {}
        if whole_tree is not None and len(whole_tree) > ARIA_MAX_CHARS:
            data = whole_tree.encode()
            parts["aria_snapshot"] = await self.kept("aria", data, "text/plain", "txt")
        if not parts:
            return answer
        return answer.model_copy(update={**update, "parts": parts})


def answer_error(failure: JobFailure) -> dict[str, Any]:
    """A failure as an answer carries it (the job error's fields, none empty)."""
    return failure.to_job_error().model_dump(exclude_none=True)
