"""The synthesized template the local stack's IAM check reads, made once and kept.

    python -m devstack.iam.synth --out FILE [--stage dev] [--name local]

synthesizes ``infra/`` offline (as ``make synth`` does: cdk-nag runs) for ``--stage``, with
the stage named ``--name`` so that names built from the stage (the schedule group
``pagefleet-<stage>``, secrets under ``pagefleet/<stage>/``) are the local stack's, and
writes the template with the local counterpart of each resource the policies name and the
roles that are the platform's principals (``devstack.iam.book`` reads it).

``synthesized()`` keeps that file in ``cdk.out/local-iam/`` with a digest of every source
file the synth imported (infra/, the shared specs of pagefleet/, cdk.json, uv.lock): a run
of the local stack reuses it until one of them changes (a synth takes 30 s or more).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger("devstack")
REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / "cdk.out" / "local-iam"
LOCAL_STAGE = "local"
SYNTH_TIMEOUT_S = 600


class SynthFailed(RuntimeError):
    """The CDK app did not synthesize; the message carries its output."""


def local_counterparts(stack: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """(logical id -> local resource, role logical id -> principal name) of a built stack."""
    from devstack.iam.book import LOCAL_WEBSOCKET_API
    from infra.grants import logical_id
    from pagefleet.specs.resources import (
        ARTIFACTS_BUCKET,
        CONNECTIONS_TABLE,
        JOB_ROLE_LOCAL_NAME,
        JOBS_TABLE,
        SCHEDULER,
        TENANTS_TABLE,
        USAGE_TABLE,
        WEBHOOK_QUEUE,
    )

    local: dict[str, Any] = {}

    def add(construct: Any, kind: str, name: str) -> None:
        local[logical_id(construct)] = {"kind": kind, "name": name}

    store = stack.store
    for table, spec in (
        (store.jobs, JOBS_TABLE),
        (store.tenants, TENANTS_TABLE),
        (store.usage, USAGE_TABLE),
        (stack.live.connections, CONNECTIONS_TABLE),
    ):
        add(table, "table", spec.local_name)
    for queue in stack.queues.all:
        add(queue.queue, "queue", queue.spec.local_name)
        add(queue.dlq, "queue", queue.spec.dlq_local_name)
    add(stack.notifications.queue, "queue", WEBHOOK_QUEUE.local_name)
    add(stack.notifications.dlq, "queue", WEBHOOK_QUEUE.dlq_local_name)
    add(stack.schedules.dlq, "queue", SCHEDULER.dlq_local_name)
    add(stack.artifacts.bucket, "bucket", ARTIFACTS_BUCKET.local_name)
    add(stack.live.api, "websocket-api", LOCAL_WEBSOCKET_API)

    principals: dict[str, str] = {}

    def principal(role: Any, name: str, local_name: str) -> None:
        add(role, "role", local_name)
        principals[logical_id(role)] = name

    for name, function in stack.functions.functions.items():
        local_name = f"pagefleet-{name.replace('_', '-')}"
        add(function, "function", local_name)
        principal(function.role, f"function/{name}", f"{local_name}-function")
    for name, pool in stack.workers.pools.items():
        principal(pool.task_definition.task_role, f"worker/{name}", f"pagefleet-worker-{name}")
    principal(stack.tenants.role, "job-role", JOB_ROLE_LOCAL_NAME)
    principal(stack.schedules.role, "scheduler", "pagefleet-scheduler")
    return local, principals


def write_synth(stage: str, name: str | None, out: Path) -> None:
    """Synthesize ``stage`` (named ``name``) and write what ``Book.from_synth`` reads."""
    from infra.app import build_app

    context: dict[str, Any] = {
        "pagefleet:stage": stage,
        "pagefleet:bundleDependencies": False,
        "pagefleet:inspectOnly": True,
    }
    if name:
        context["pagefleet:overrides"] = json.dumps({"stage": name})
    with tempfile.TemporaryDirectory(prefix="pagefleet-iam-synth-") as outdir:
        app, stack = build_app(context=context, outdir=outdir)
        assembly = app.synth()
        template_path = assembly.get_stack_artifact(stack.artifact_id).template_full_path
        template = json.loads(Path(template_path).read_text())
    _write_atomically(out, json.dumps(record(stack, template)))


def record(stack: Any, template: dict[str, Any]) -> dict[str, Any]:
    """What ``Book.from_synth`` reads, for a built and synthesized stack."""
    local, principals = local_counterparts(stack)
    return {
        "stage": stack.config.stage,
        "template": template,
        "locals": local,
        "principals": principals,
        "inputs": _inputs(),
    }


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _inputs() -> dict[str, str]:
    """Every repository file the synth read: the modules it imported, cdk.json, uv.lock."""
    files = {REPO_ROOT / "cdk.json", REPO_ROOT / "uv.lock"}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        resolved = Path(path).resolve() if path else None
        if resolved and any(resolved.is_relative_to(REPO_ROOT / d) for d in ("infra", "pagefleet")):
            files.add(resolved)
    return {str(p.relative_to(REPO_ROOT)): _digest(p) for p in sorted(files) if p.exists()}


def _fresh(path: Path) -> bool:
    try:
        inputs = json.loads(path.read_text())["inputs"]
    except (OSError, ValueError, KeyError):
        return False
    for relative, digest in inputs.items():
        file = REPO_ROOT / relative
        if not file.exists() or _digest(file) != digest:
            return False
    return True


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(temp, path)


def synthesized(stage: str = "dev", name: str = LOCAL_STAGE) -> Path:
    """The kept synth of ``stage`` named ``name``; made (in a child process, under a lock:
    several stacks may start at once) when missing or older than its sources."""
    path = CACHE_DIR / f"{stage}-as-{name}.json"
    if _fresh(path):
        return path
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with (CACHE_DIR / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _fresh(path):
                return path
            log.warning("synthesizing infra/ (%s) for the local IAM check: once, ~30 s", stage)
            env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
            env.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
            done = subprocess.run(
                [
                    *(sys.executable, "-m", "devstack.iam.synth"),
                    *("--stage", stage, "--name", name, "--out", str(path)),
                ],
                cwd=REPO_ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=SYNTH_TIMEOUT_S,
                check=False,
            )
            if done.returncode != 0:
                raise SynthFailed(
                    f"synth of {stage} for the local IAM check failed (PAGEFLEET_LOCAL_IAM=0 "
                    f"runs the stack without the check):\n{done.stderr[-3000:]}"
                )
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(lock, fcntl.LOCK_UN)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.iam.synth")
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--name", default=LOCAL_STAGE, help="the stage's name ('' keeps it)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    write_synth(args.stage, args.name or None, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
