"""Each function's Tracer, in a Lambda environment: AWS SDK calls traced, nothing else patched.

Told nothing, the Powertools Tracer patches (and so imports at cold start) every library
the X-Ray SDK knows; ``functions.xray`` names what each function really calls. Each
case imports a handler module in a fresh interpreter with the variables Lambda sets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = (
    "functions.api.handler",
    "functions.authorizer.handler",
    "functions.dead_letters.handler",
    "functions.job_changes.handler",
    "functions.live.handler",
    "functions.scheduler.handler",
    "functions.sweeper.handler",
    "functions.webhooks.handler",
)
# Patched by the X-Ray SDK (so imported) when the Tracer is told nothing; no function calls
# them. (http.client is not among them: urllib3, under botocore, imports it anyway.)
NEVER_CALLED = ("requests", "sqlite3", "pymongo", "psycopg2", "sqlalchemy")
PROBE = """
import importlib, json, sys
module = importlib.import_module(sys.argv[1])
imported = [name for name in sys.argv[2:] if name in sys.modules]
import botocore.client, httpx
print(json.dumps({
    "enabled": not module.tracer.disabled,
    "botocore": bool(getattr(botocore.client, "_xray_enabled", False)),
    "botocore_wrapped": hasattr(botocore.client.BaseClient._make_api_call, "__wrapped__"),
    "httpx": httpx.Client.__name__ == "_InstrumentedClient",
    "imported": imported,
}))
"""


def lambda_import(module: str, tmp_path: Path) -> dict[str, Any]:
    """Import ``module`` in a fresh Python as the Lambda runtime would, and report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "AWS_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        LAMBDA_TASK_ROOT=str(tmp_path),
        AWS_LAMBDA_FUNCTION_NAME=module.split(".")[1],
        AWS_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    # The probe imports httpx after the handler (and after listing what it imported), to
    # read whether the Tracer patched it.
    out = subprocess.run(
        [sys.executable, "-c", PROBE, module, *NEVER_CALLED],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("module", HANDLERS)
def test_a_function_traces_its_aws_calls_and_patches_nothing_it_does_not_call(
    module: str, tmp_path: Path
) -> None:
    report = lambda_import(module, tmp_path)
    assert report["enabled"], "in Lambda the Tracer must be on"
    assert report["botocore"] and report["botocore_wrapped"], "AWS SDK calls must be traced"
    imported = set(report["imported"])
    assert not imported & set(NEVER_CALLED), f"{module} imported {imported} for the Tracer"
    assert report["httpx"] is (module == "functions.webhooks.handler")
