"""The local stack under the synthesized template's IAM, through what the platform does, then
cross-tenant probes: ``make deploy-check``'s IAM gate.

    .venv/bin/python scripts/iam_check.py [--merge cdk.out/deploy-check/iam-smoke.json]

Starts the local stack with its IAM check on (each function, worker, event source and the
tagged job role signs as its own principal; every call is checked against that principal's
policies in the synthesized template), and drives it as clients do: every example workflow
(artifacts, saved sessions, pagination, forms), a session never saved, a tenant's secret,
a schedule fired by the local Scheduler, a job followed over the WebSocket, a webhook, a
cancel and a deletion, an order that waits in review and is resolved. Then tenant A's
stores, built by the worker's own code, reach for tenant B's artifacts, sessions, usage and
secrets. ``--merge`` adds other runs' reports
(the worker smoke's). Prints, as its last lines::

    iam: <N> calls by <M> principals checked, 0 denied
    iam: cross-tenant probes <K> of <K> denied

Exit 0 only if nothing the platform did was refused and every probe was.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from devstack.examples import EXAMPLES_DIR, load_example, run_examples  # noqa: E402
from devstack.iam.guard import merge_reports  # noqa: E402
from devstack.iam.local import summary  # noqa: E402
from devstack.iam.probes import TASK_ROLE_PROBE, Probe, cross_tenant_probes  # noqa: E402
from devstack.iam.probes import summary as probes_summary  # noqa: E402
from devstack.loopback import serve_on_loopback  # noqa: E402
from devstack.stack import LocalStack  # noqa: E402
from pagefleet.client import PagefleetClient  # noqa: E402
from pagefleet.runtime import RUNTIME  # noqa: E402

TIMEOUT_S = 180
PROBING = "probe-a"  # the tenant whose stores reach for another's
SWEEP_S = 5  # the sweeper's timer (a minute on AWS): it runs during the tour


class _Hooks(BaseHTTPRequestHandler):
    received: list[bytes] = []
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.lock:
            self.received.append(body)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _page(stack: LocalStack, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"steps": [{"action": "goto", "url": f"{stack.site_url}/"}, *steps]}


def _succeeds(client: PagefleetClient, job: dict[str, Any]) -> str:
    done = client.wait(client.submit(job).job_id, timeout=TIMEOUT_S)
    if done.status.value != "succeeded":
        raise RuntimeError(f"job ended {done.status.value}: {done.error}")
    return done.job_id


def _wait_for(what: str, check: Callable[[], Any], timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not within {timeout_s} s")


def tour(stack: LocalStack) -> list[str]:
    """What a client does, step by step; the names of the steps that went wrong."""
    client = stack.client()
    examples = run_examples(client, stack.site_url)
    problems = [f"example {r.name}: {r.problem or 'an artifact'}" for r in examples if not r.ok]
    print(f"  ok   {len(examples) - len(problems)} of {len(examples)} example workflows")

    def step(name: str, action: Callable[[], Any]) -> None:
        try:
            action()
            print(f"  ok   {name}")
        except Exception as exc:
            problems.append(f"{name}: {exc}")
            print(f"  FAIL {name}: {exc}")

    step(
        "use_session of a session never saved",
        lambda: _succeeds(
            client, _page(stack, {"action": "use_session", "name": "never", "required": False})
        ),
    )

    def secret() -> None:
        RUNTIME.client("secretsmanager").create_secret(
            Name="pagefleet/local/dev/password", SecretString="s3cret"
        )
        fill = {"action": "fill", "selector": "#password", "value": "{{secrets.password}}"}
        _succeeds(
            client, {"steps": [{"action": "goto", "url": f"{stack.site_url}/login.html"}, fill]}
        )

    step("a tenant's secret", secret)

    def schedule() -> None:
        at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
        spec = {"name": "iam", "expression": f"at({at:%Y-%m-%dT%H:%M:%S})", "job": _page(stack)}
        made = client.create_schedule(spec)
        assert stack.sources is not None and stack.sources.scheduler is not None
        stack.sources.scheduler.tick(at + timedelta(seconds=1))
        runs = _wait_for("the fired job", lambda: client.schedule_runs(made.schedule_id).jobs)
        client.wait(runs[0].job_id, timeout=TIMEOUT_S)
        client.delete_schedule(made.schedule_id)

    step("a schedule fired by the Scheduler", schedule)

    def follow() -> None:
        job = client.submit(_page(stack, {"action": "screenshot", "name": "p.png"}))
        items = list(client.follow(job.job_id, timeout=TIMEOUT_S))
        if not items:
            raise RuntimeError("nothing followed")

    step("a job followed over the WebSocket", follow)

    def webhook() -> None:
        hooks = serve_on_loopback(_Hooks, "iam-hooks")
        try:
            client.set_default_webhook(f"{hooks.url}/hook")
            job_id = _succeeds(client, _page(stack))
            _wait_for("the webhook", lambda: client.deliveries(job_id))
            client.set_default_webhook(None)
        finally:
            hooks.stop()

    step("a webhook delivered", webhook)

    def cancel_and_delete() -> None:
        wait = {"action": "wait_for", "selector": "#never", "timeout_ms": 60000}
        job = client.submit(_page(stack, wait))
        _wait_for("running", lambda: client.get(job.job_id).status.value == "running")
        client.cancel(job.job_id)
        client.wait(job.job_id, timeout=TIMEOUT_S)
        client.delete(job.job_id)

    step("a cancel and a deletion", cancel_and_delete)

    def review() -> None:
        assert stack.site is not None
        body = load_example(EXAMPLES_DIR / "place-order.json", stack.site_url)
        del body["steps"][4]["check"]  # nothing can tell: the job waits for a person
        stack.site.orders.set(drop=True)  # the order recorded, never answered
        try:
            job = client.wait(client.submit(body).job_id, timeout=TIMEOUT_S)
        finally:
            stack.site.orders.set(drop=False)
        if job.status.value != "needs_review":
            raise RuntimeError(f"the order ended {job.status.value}, not in review")
        client.resolve(job.job_id, "not_done")  # queued again by the API
        client.wait(job.job_id, timeout=TIMEOUT_S)

    step("an order in review, resolved", review)

    def heavy() -> None:  # the heavy pool's worker runs from the start (every_pool)
        _succeeds(client, {**_page(stack), "pool": "heavy"})

    step("a job on the heavy pool", heavy)
    return problems


def probes(stack: LocalStack) -> list[Probe]:
    assert stack.worker_settings is not None
    worker = stack.iam.clients(f"worker/{stack.worker_settings.pool}")
    found = cross_tenant_probes(
        stack.worker_settings,
        worker("sts"),
        RUNTIME.client,
        tenant=PROBING,
        other="probe-b",
        worker_client=worker,
    )
    for probe in found:
        mark = "ok  " if probe.as_expected else "FAIL"
        print(f"  {mark} {probe.name}: {'refused' if probe.refused else 'allowed'}")
    return found


def _unmeant(denied: list[dict[str, Any]], found: list[Probe], worker: str) -> list[dict[str, Any]]:
    """``denied`` without the refusals the task-role probe meant: it reads a session's
    commands as the worker's own role (untagged, so not named by the probing tenant), one
    Query each, which the role's explicit deny refuses."""
    meant = sum(1 for p in found if p.name.startswith(TASK_ROLE_PROBE) and p.refused)
    out = []
    for denial in denied:
        if meant and denial["principal"] == worker and denial["action"] == "dynamodb:Query":
            meant -= 1
            continue
        out.append(denial)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merge", type=Path, action="append", default=[])
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    # Every pool's worker runs, each as its own task role.
    local = LocalStack(
        api_port=0,
        workers=args.workers,
        concurrency=2,
        iam=True,
        sweeper_interval_s=SWEEP_S,
        every_pool=True,
    )
    with local as stack:
        print(f"local stack up, IAM from the synthesized template ({stack.iam.book_path})")
        problems = tour(stack)
        runs = stack.sources.sweeper.runs if stack.sources else 0
        _wait_for("a sweeper run", lambda: stack.sources and stack.sources.sweeper.runs > runs)
        found = probes(stack)
        assert stack.worker_settings is not None
        worker = f"worker/{stack.worker_settings.pool}"
        merged = (json.loads(p.read_text()) for p in args.merge)
        report = merge_reports(stack.iam_report(), *merged)
    # The probes' refusals are meant; any other is a call the platform needs and may not make.
    probing = f"(tenant={PROBING})"
    report["denied"] = _unmeant(
        [d for d in report["denied"] if not d["principal"].endswith(probing)], found, worker
    )
    stack.cleanup_logs()
    for denial in report["denied"]:
        print(
            f"  DENIED {denial['principal']}: {denial['action']} on {denial['resource']} "
            f"({denial['reason']})"
        )
    for problem in problems:
        print(f"  problem: {problem}")
    checks = report["checks"] or 1
    print(f"iam: {report['check_seconds'] / checks * 1e6:.0f} µs of checking per call")
    print(summary(report))
    print(probes_summary(found))
    ok = not report["denied"] and not problems and all(p.as_expected for p in found)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
