"""What the chaos tests and ``bench/chaos.py`` share (here, where both may import it): a
target site that misbehaves on request, ways to kill a worker or its Chromium, and an audit
of job records.

Everything listens on and talks to 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import psutil
from botocore.config import Config

from devstack.constants import LOCAL_REGION, aws_env
from devstack.loopback import LoopbackServer, serve_on_loopback
from devstack.processes import ManagedProcess
from devstack.stack import DEV_TENANT, LocalStack
from pagefleet.adapters.dynamodb import DynamoJobStore
from pagefleet.adapters.faults import INJECTED
from pagefleet.errors import NotFound
from pagefleet.jobs.record import JobRecord
from pagefleet.jobs.states import JobStatus

# Final for the purpose of "lost": nothing more happens to the job without an operator.
SETTLED = frozenset(s for s in JobStatus if s.is_settled)

# Chaos runs: a killed worker's job comes back after this lease, not after 60 s.
CHAOS_LEASE_S = 10
CHAOS_HEARTBEAT_S = 3
CHAOS_BREAKER = (
    '{"window_s":30,"min_requests":3,"failure_rate":0.5,"cooldown_s":5,"probe_timeout_s":10}'
)


def chaos_worker_env(**extra: str) -> dict[str, str]:
    return {
        "PAGEFLEET_LEASE_SECONDS": str(CHAOS_LEASE_S),
        "PAGEFLEET_HEARTBEAT_SECONDS": str(CHAOS_HEARTBEAT_S),
        "PAGEFLEET_BREAKER": CHAOS_BREAKER,
        "POWERTOOLS_LOG_LEVEL": "INFO",
        **extra,
    }


# --- the target site -------------------------------------------------------------------------
PAGE = "<!doctype html><title>{name}</title><h1 id='name'>{name}</h1><p>chaos page</p>"


class ChaosSite:
    """Pages on 127.0.0.1 that behave as told.

    ``/page/<name>``        a small page whose h1 is <name>
    ``/slow/<name>?s=N``    the same page after N seconds
    ``/hang``               never answers (until the site stops)
    ``/flaky/<name>``       503 while an outage is on (``outage(seconds)``), else the page
    ``/step/<token>``       a page counted per token (``step_hits``): a session step's effect
    """

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._outage_until = 0.0
        self._lock = threading.Lock()
        self.hits: Counter[str] = Counter()
        self.step_hits: Counter[str] = Counter()
        self.served_503 = 0
        self.times_503: list[float] = []  # when each 503 was served (epoch s)
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                path = parts.path
                kind, _, name = path.strip("/").partition("/")
                with site._lock:
                    site.hits[kind] += 1
                    if kind == "step":
                        site.step_hits[name] += 1
                if kind == "favicon.ico":
                    self._send(404, "")
                elif kind == "hang":
                    site._stopped.wait(600)
                    with contextlib.suppress(OSError):
                        self._send(200, PAGE.format(name="late"))
                elif kind == "slow":
                    seconds = float(parse_qs(parts.query).get("s", ["1"])[0])
                    site._stopped.wait(seconds)
                    self._send(200, PAGE.format(name=name or "slow"))
                elif kind == "flaky" and time.monotonic() < site._outage_until:
                    with site._lock:
                        site.served_503 += 1
                        site.times_503.append(time.time())
                    self._send(503, "<h1>down for maintenance</h1>")
                elif kind in ("page", "flaky"):
                    self._send(200, PAGE.format(name=name or kind))
                elif kind == "step":
                    # Its own connection: Chromium sends a GET again by itself only when a
                    # kept-alive connection failed under it, and a count must mean a run.
                    self.close_connection = True
                    self._send(200, PAGE.format(name=name), close=True)
                else:
                    self._send(404, "<h1>not found</h1>")

            def _send(self, status: int, body_text: str, *, close: bool = False) -> None:
                body = body_text.encode()
                self.send_response(status)
                if close:
                    self.send_header("Connection", "close")
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

        self._handler = Handler
        self._server: LoopbackServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the site first"
        return self._server.url

    def start(self) -> ChaosSite:
        self._server = serve_on_loopback(self._handler, "chaos-site")
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._server is not None:
            self._server.stop()

    def outage(self, seconds: float) -> None:
        """Answer 503 on /flaky/* for the next ``seconds``."""
        self._outage_until = time.monotonic() + seconds

    @property
    def outage_on(self) -> bool:
        return time.monotonic() < self._outage_until


# --- workflows -------------------------------------------------------------------------------
def page_job(site: ChaosSite, name: str, *, sleep_ms: int = 0, **extra: Any) -> dict[str, Any]:
    """Open a page, optionally dwell on it, read its h1 (the result proves the page loaded)."""
    steps: list[dict[str, Any]] = [{"action": "goto", "url": f"{site.url}/page/{name}"}]
    if sleep_ms:
        steps.append({"action": "sleep", "ms": sleep_ms})
    steps.append({"action": "extract", "name": "title", "selector": "#name"})
    return {"name": name, "steps": steps, **extra}


def flaky_job(site: ChaosSite, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "steps": [
            {"action": "goto", "url": f"{site.url}/flaky/{name}"},
            {"action": "extract", "name": "title", "selector": "#name"},
        ],
        "max_attempts": 10,
        "retry": {"base_seconds": 1, "cap_seconds": 5},
        **extra,
    }


def hang_job(site: ChaosSite, name: str, *, job_timeout_s: int = 3) -> dict[str, Any]:
    return {
        "name": name,
        "steps": [{"action": "goto", "url": f"{site.url}/hang"}],
        "options": {"job_timeout_s": job_timeout_s},
        "max_attempts": 1,
    }


# --- processes -------------------------------------------------------------------------------
def worker_by_id(stack: LocalStack, worker_id: str) -> ManagedProcess:
    """``local-worker-3`` (or a lease owner ``local-worker-3/ab12cd34``) -> its process."""
    index = int(worker_id.split("/", 1)[0].rsplit("-", 1)[1])
    return stack.worker_processes[index]


def live_workers(stack: LocalStack) -> list[ManagedProcess]:
    return [p for p in stack.worker_processes if p.alive()]


def kill_worker(proc: ManagedProcess) -> None:
    """SIGKILL a worker and everything it started, as when its task dies on Fargate."""
    family = proc.descendants()
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for child in family:
        with contextlib.suppress(psutil.Error):
            child.kill()
    proc.popen.wait(10)
    psutil.wait_procs(family, timeout=5)


def replace_exited(stack: LocalStack, accounted: set[int]) -> int:
    """ECS keeps the desired count: a worker that exited on its own gets a successor."""
    replaced = 0
    for proc in list(stack.worker_processes):
        if id(proc) not in accounted and not proc.alive():
            accounted.add(id(proc))
            stack.start_worker()
            replaced += 1
    return replaced


def held_by(stack: LocalStack, store: DynamoJobStore, worker: ManagedProcess) -> list[JobRecord]:
    """The running jobs whose lease this worker holds."""
    wid = f"local-worker-{stack.worker_processes.index(worker)}/"
    records, _ = store.list_page(DEV_TENANT, status=JobStatus.RUNNING, limit=100, start_key=None)
    return [r for r in records if (r.lease_owner or "").startswith(wid)]


def browser_main_processes(proc: ManagedProcess) -> list[psutil.Process]:
    """The worker's Chromium browser processes (not their renderers / zygotes / GPU)."""
    found = []
    for child in proc.descendants():
        with contextlib.suppress(psutil.Error):
            if "chrom" not in child.name().lower():
                continue
            parent = child.parent()
            if parent is not None and "chrom" in parent.name().lower():
                continue  # a helper of a browser, not the browser
            if any(arg.startswith("--type=") for arg in child.cmdline()):
                continue
            found.append(child)
    return found


def kill_chromium(proc: ManagedProcess) -> int:
    """SIGKILL the worker's Chromium main process(es); returns how many were killed."""
    killed = 0
    for browser in browser_main_processes(proc):
        with contextlib.suppress(psutil.Error):
            browser.send_signal(signal.SIGKILL)
            killed += 1
    return killed


def wait_until(predicate: Any, timeout: float, poll: float = 0.25, what: str = "") -> Any:
    """Poll until ``predicate()`` is truthy; its value, or TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f} s: {what or predicate}")
        time.sleep(poll)


# --- records ---------------------------------------------------------------------------------
def record_store(stack: LocalStack) -> DynamoJobStore:
    """A job store on its own boto3 client: the audit never sees injected faults."""
    assert stack.provisioned is not None
    config = Config(retries={"mode": "standard", "max_attempts": 10})
    dynamodb = _local_client(stack, "dynamodb", config=config)
    return DynamoJobStore(dynamodb, stack.provisioned.jobs_table)


def sqs_client(stack: LocalStack) -> Any:
    return _local_client(stack, "sqs")


def dynamodb_client(stack: LocalStack) -> Any:
    return _local_client(stack, "dynamodb")


def _local_client(stack: LocalStack, service: str, **options: Any) -> Any:
    """A client of the stack's embedded AWS of its own (its own session, no injected faults)."""
    env = aws_env(stack.aws_endpoint)
    return boto3.session.Session().client(  # type: ignore[call-overload]
        service,
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name=os.environ.get("AWS_DEFAULT_REGION", LOCAL_REGION),
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        **options,
    )


def final_entries(record: JobRecord) -> list[Any]:
    return [a for a in record.attempts if a.status is not None and a.status.is_final]


@dataclass
class Audit:
    """What the records say about a set of jobs."""

    statuses: Counter[str] = field(default_factory=Counter)
    failed_by_reason: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)
    records: dict[str, JobRecord] = field(default_factory=dict)

    def count(self, status: JobStatus) -> int:
        return self.statuses[status.value]


def audit(store: DynamoJobStore, job_ids: Iterable[str], tenant_id: str = DEV_TENANT) -> Audit:
    out = Audit()
    for job_id in job_ids:
        try:
            record = store.get(tenant_id, job_id)
        except NotFound:
            out.lost.append(job_id)
            continue
        out.records[job_id] = record
        out.statuses[record.status.value] += 1
        if record.status not in SETTLED:
            out.lost.append(job_id)
            continue
        if record.status in (JobStatus.FAILED, JobStatus.TIMED_OUT) and record.error:
            reason = record.error.kind + (
                f"/{record.error.timeout}" if record.error.timeout else ""
            )
            out.failed_by_reason[f"{record.status.value}:{reason}"] += 1
        finals = final_entries(record)
        if len(finals) > 1:
            out.doubled.append(job_id)
        elif finals and (finals[0].attempt != record.attempt or finals[0].status != record.status):
            # The one final entry must be the last attempt's, and match the job's state.
            out.inconsistent.append(job_id)
    return out


def wait_settled(store: DynamoJobStore, job_ids: Iterable[str], timeout: float) -> Audit:
    """Wait (bounded) until every job is settled; the audit of the last look."""
    pending = set(job_ids)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for job_id in list(pending):
            with contextlib.suppress(NotFound):
                if store.get(DEV_TENANT, job_id, consistent=False).status in SETTLED:
                    pending.discard(job_id)
        if pending:
            time.sleep(0.5)
    return audit(store, job_ids)


def aws_fault_env(rate: float) -> dict[str, str]:
    """Settings that make a runtime fail ``rate`` of its AWS calls (workers and Lambda
    functions alike: ``RUNTIME.job_services`` turns the injector on in that process)."""
    return {"PAGEFLEET_AWS_FAULT_RATE": str(rate)}


# What a worker logs when it puts a job's message back because its site's breaker is open.
BREAKER_DEFERRAL = "circuit open for "


def breaker_deferrals(logs: Iterable[Path]) -> dict[str, list[float]]:
    """When each job was put back because its site's circuit breaker was open (epoch s),
    from the workers' JSON logs: a job deferred so waits for the site, not for a recovery."""
    out: dict[str, list[float]] = {}
    for path in logs:
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            if BREAKER_DEFERRAL not in line:
                continue
            try:
                entry = json.loads(line)
                at = datetime.strptime(entry["timestamp"], "%Y-%m-%d %H:%M:%S,%f%z").timestamp()
            except (ValueError, KeyError, TypeError):
                continue
            if str(entry.get("reason", "")).startswith(BREAKER_DEFERRAL) and entry.get("job_id"):
                out.setdefault(entry["job_id"], []).append(at)
    return out


def injected_faults(*logs: Path) -> int:
    """How many AWS faults the processes writing these logs injected (each logs one line)."""
    return sum(
        path.read_text(errors="replace").count(f"{INJECTED}: ") for path in logs if path.exists()
    )
