"""The code users copy from the API reference (docs/api.md, where the README's reference
went): the webhook signature check runs as written."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from pagefleet.notify import signing

API_REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def _verify_snippet() -> Any:
    text = API_REFERENCE.read_text()
    block = re.search(r"<!-- webhook-verify[^>]*-->\n```python\n(.*?)```", text, re.S)
    assert block is not None, "docs/api.md lost its webhook verification snippet"
    namespace: dict[str, Any] = {}
    exec(compile(block.group(1), "docs/api.md", "exec"), namespace)  # noqa: S102 - our own docs
    return namespace["verify"]


def test_the_readme_verifies_pagefleets_signatures() -> None:
    verify = _verify_snippet()
    secret = signing.new_secret()
    body = b'{"event":"job.finished","job_id":"01j","status":"succeeded"}'
    now = int(time.time())
    header = signing.sign(secret, now, body)
    assert verify(secret, header, body)
    assert not verify(secret, header, body.replace(b"succeeded", b"failed"))
    assert not verify(signing.new_secret(), header, body)
    assert not verify(secret, signing.sign(secret, now - 3600, body), body)  # replayed
