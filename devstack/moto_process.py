"""The embedded AWS (``devstack.embedded_aws``) as a child process of the local stack."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from devstack.processes import ManagedProcess


def spawn_moto(
    port: int, held: socket.socket | None, env: Mapping[str, str], log_path: Path
) -> ManagedProcess:
    """Start moto on ``held`` (a listening socket it inherits; closed here once passed on)
    or, without one, on ``port``."""
    where = ["--fd", str(held.fileno())] if held is not None else ["-p", str(port)]
    try:
        return ManagedProcess(
            "moto",
            # moto with DynamoDB's atomic conditional writes (see embedded_aws).
            [sys.executable, "-m", "devstack.embedded_aws", *where],
            env={**os.environ, "NO_PROXY": "*", "MOTO_PORT": str(port), **env},
            log_path=log_path,
            pass_fds=(held.fileno(),) if held is not None else (),
        )
    finally:
        if held is not None:  # moto has its own copy now
            held.close()


def wait_for_moto(moto: ManagedProcess, endpoint: str, timeout_s: float) -> str | None:
    """None once moto answers; else why it will not."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(trust_env=False, timeout=2) as http:
        while True:
            if not moto.alive():
                return f"moto server exited at start:\n{moto.tail()}"
            with contextlib.suppress(httpx.HTTPError):
                if http.get(f"{endpoint}/moto-api/").status_code < 500:
                    return None
            if time.monotonic() > deadline:
                return f"moto server not ready on {endpoint}"
            time.sleep(0.1)
