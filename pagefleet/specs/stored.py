"""The validation context of what is read back from a record (``STORED``).

A rule added to a model after records were written must not make them unreadable (a list,
a GET, the stream reader and the sweeper read every one): a validator that refuses what
was accepted before skips its check under this context, and the job that breaks the rule
is refused when it is made (or fails when it runs) instead.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationInfo

STORED: dict[str, Any] = {"stored": True}


def stored(info: ValidationInfo) -> bool:
    """Whether the model is read back from a record (validated with ``STORED``)."""
    return bool(info.context and info.context.get("stored"))
