"""A Lambda handler whose module takes ``SLOW_INIT_S`` seconds to import (a cold start)."""

from __future__ import annotations

import os
import time
from typing import Any

time.sleep(float(os.environ.get("SLOW_INIT_S", "0")))


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"statusCode": 200, "body": "warm"}
