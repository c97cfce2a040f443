"""The Tracer every function makes: X-Ray segments for the calls the function makes.

Told nothing, the Powertools Tracer patches every library the X-Ray SDK knows (requests,
httpx, sqlite3, http.client, database drivers...), importing each one present at cold start
(~0.1 s in Lambda). A function here calls AWS through botocore and, the webhook sender
alone, HTTP through httpx: only those are patched (docs/decisions.md, 2026-12-01).
"""

from __future__ import annotations

from aws_lambda_powertools import Tracer

# Every function's AWS SDK calls, traced.
AWS_SDK = ("botocore",)
# The webhook sender's POSTs (pagefleet.notify.sender through an httpx.Client).
HTTPX = ("httpx",)


def function_tracer(service: str, *, http: bool = False) -> Tracer:
    """The Tracer for ``service``; ``http``: the function also sends HTTP with httpx.

    Off Lambda the Tracer disables itself and patches nothing.
    """
    return Tracer(service=service, patch_modules=AWS_SDK + HTTPX if http else AWS_SDK)
