"""A handler whose init (the module's import) outlasts the function's timeout, as a cold
start on a loaded machine can: Lambda does not count init against the timeout.

Imported by ``python -m devstack.lambda_env tests.support.slow_init_handler:handler``.
"""

from __future__ import annotations

import os
import time
from typing import Any

INIT_S = 3.0
time.sleep(INIT_S)  # the slow init under test, not a wait for something


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"pid": os.getpid()}
