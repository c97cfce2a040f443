"""The local stack: pagefleet on one machine, on loopback only.

    with LocalStack(api_port=0) as stack:
        client = stack.client()
        ...

Starts moto server (the embedded AWS), creates the same tables, queues and bucket as infra/
(``devstack.provision``), runs the Lambda functions in their own execution environments
(``devstack.functions``), serves the REST API through the local gateway, plays the event
sources (``devstack.pollers``), starts ``python -m browser_task`` workers, serves the demo
website, and creates a dev tenant. Each function, worker and event source runs as its role
in the synthesized template, and the embedded AWS checks every call against that role's
policies (``devstack.iam``; ``iam=False`` or ``PAGEFLEET_LOCAL_IAM=0`` turns it off).
``stop()`` (also on exceptions and Ctrl-C) leaves no process behind.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.console_app import local_console
from devstack.constants import LOCAL_REGION, aws_env
from devstack.demo_site import DemoSite
from devstack.event_sources import EventSources
from devstack.functions import local_functions
from devstack.gateway import LocalGateway, RestApi, pagefleet_rest_api
from devstack.gateway.server import App
from devstack.iam.local import LocalIam, enabled_by_default
from devstack.iam.synth import SynthFailed
from devstack.lambda_env import LambdaFunction
from devstack.live_parts import LiveOptions, LiveParts
from devstack.local_settings import LOCAL_POOLS, local_settings
from devstack.loopback import reserve_loopback_port
from devstack.moto_process import spawn_moto, wait_for_moto
from devstack.pollers import stop_together
from devstack.process_env import EnvOverlay
from devstack.processes import ManagedProcess
from devstack.provision import Provisioned, QueuesNotSettled, create_all
from devstack.stack_workers import LocalWorkers, WorkerStartFailed
from devstack.strict_aws import StrictRules
from devstack.sts_lifetime import LIFETIME_ENV
from devstack.tenant_role import create_job_role
from pagefleet.client import PagefleetClient
from pagefleet.runtime import RUNTIME
from pagefleet.specs.console_site import CONSOLE_PATH
from pagefleet.specs.pools import PoolOffer
from pagefleet.specs.settings import ApiSettings, WorkerSettings, to_env
from pagefleet.tenancy.api_keys import create_api_key

log = logging.getLogger("devstack")

REPO_ROOT = Path(__file__).resolve().parents[1]
DEV_TENANT = "dev"


class StackError(RuntimeError):
    """A part of the local stack did not start; the message says which and why."""


@dataclass
class StackInfo:
    api_url: str
    site_url: str
    aws_endpoint: str
    console_url: str
    dev_api_key: str
    log_dir: Path
    provisioned: Provisioned
    env: dict[str, str] = field(default_factory=dict)


class LocalStack:
    def __init__(
        self,
        *,
        api_port: int = 8080,
        moto_port: int = 0,
        site_port: int = 0,
        workers: int = 1,
        concurrency: int = 2,
        log_dir: Path | None = None,
        authorizer_ttl_s: float = 300,
        sweeper_interval_s: float = 60,
        worker_env: dict[str, str] | None = None,
        lambda_env: dict[str, str] | None = None,
        start_timeout_s: float = 60,
        live: LiveOptions | None = None,
        iam: bool | None = None,
        strict: StrictRules | None = None,
        sts_lifetime_s: float | None = None,
        pools: tuple[PoolOffer, ...] = LOCAL_POOLS,
        every_pool: bool = False,
    ) -> None:
        """``worker_env`` goes over the workers' environment, ``lambda_env`` over every
        Lambda function's (e.g. ``PAGEFLEET_AWS_FAULT_RATE`` for chaos runs). ``iam``
        (default: on unless ``PAGEFLEET_LOCAL_IAM=0``) checks every AWS call. ``strict``: the
        AWS refusals its embedded AWS makes (``devstack.strict_aws``; default: all on, as
        ``PAGEFLEET_STRICT_AWS_*`` in the environment set them). ``sts_lifetime_s``: how
        long an AssumeRole session lasts (``devstack.sts_lifetime``; default
        ``PAGEFLEET_LOCAL_STS_LIFETIME_S`` or five minutes). ``pools``: the worker pools
        declared (their queues made, their offers published); ``workers`` run the standard
        pool, and ``every_pool`` adds one small worker (one slot) for each other pool, with
        that pool's isolation, so jobs routed anywhere run."""
        if workers < 0:
            raise ValueError("workers must be >= 0")
        # The API's port is known before anything starts (held like moto's): the stream
        # reader's settings carry the console's URL, which the notifications link to.
        self._api_sock = None if api_port else reserve_loopback_port()
        self.api_port = api_port or int(self._api_sock.getsockname()[1])  # type: ignore[union-attr]
        # Without a port asked for, moto serves on a socket held from now (a chosen port can
        # be taken by an outgoing connection before moto binds it).
        self._moto_sock = None if moto_port else reserve_loopback_port()
        self.moto_port = moto_port or int(self._moto_sock.getsockname()[1])  # type: ignore[union-attr]
        self.site_port = site_port
        self.workers = workers
        self.pools = pools
        self.every_pool = every_pool
        self.concurrency = concurrency
        self.authorizer_ttl_s = authorizer_ttl_s
        self.sweeper_interval_s = sweeper_interval_s
        self.worker_env = dict(worker_env or {})
        self.lambda_env = dict(lambda_env or {})
        self.start_timeout_s = start_timeout_s
        self.live = LiveParts(live)
        self.iam_enabled = enabled_by_default() if iam is None else iam
        self.strict = strict
        self.sts_lifetime_s = sts_lifetime_s
        self.iam = LocalIam.off()
        self._own_log_dir = log_dir is None
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="pagefleet-local-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)

        self.moto: ManagedProcess | None = None
        self._workers = LocalWorkers(self.log_dir, self.worker_env)
        self.gateway: LocalGateway | None = None
        self.rest_api: RestApi | None = None
        self.functions: dict[str, LambdaFunction] = {}
        self.site: DemoSite | None = None
        self.sources: EventSources | None = None
        self.provisioned: Provisioned | None = None
        self.core_settings: dict[str, Any] = {}
        self.api_settings: ApiSettings | None = None
        self.worker_settings: WorkerSettings | None = None
        self.dev_api_key: str | None = None
        self._env = EnvOverlay()
        self._started = False

    # --- addresses -----------------------------------------------------------------------------
    @property
    def aws_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.moto_port}"

    @property
    def api_url(self) -> str:
        if self.gateway is None:
            raise StackError("the gateway is not running")
        return self.gateway.url

    @property
    def console_url(self) -> str:
        return f"{self.api_url}{CONSOLE_PATH}"

    def _console_base(self) -> str:
        """The console's URL as the gateway will serve it (before it does)."""
        return f"http://127.0.0.1:{self.api_port}{CONSOLE_PATH}"

    @property
    def site_url(self) -> str:
        if self.site is None:
            raise StackError("the demo site is not running")
        return self.site.url

    def info(self) -> StackInfo:
        assert self.provisioned is not None and self.dev_api_key is not None
        return StackInfo(
            api_url=self.api_url,
            site_url=self.site_url,
            aws_endpoint=self.aws_endpoint,
            console_url=self.console_url,
            dev_api_key=self.dev_api_key,
            log_dir=self.log_dir,
            provisioned=self.provisioned,
            env=self.cli_env(),
        )

    def cli_env(self) -> dict[str, str]:
        """What a shell needs to use the CLI against this stack (API and admin commands)."""
        assert self.provisioned is not None
        return {
            "PAGEFLEET_API_URL": self.api_url,
            "PAGEFLEET_API_KEY": self.dev_api_key or "",
            "PAGEFLEET_TENANTS_TABLE": self.provisioned.tenants_table,
            "PAGEFLEET_USAGE_TABLE": self.provisioned.usage_table,
            "AWS_ENDPOINT_URL": self.aws_endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": LOCAL_REGION,
        }

    # --- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalStack:
        if self._started:
            return self
        self._started = True
        try:
            if self.iam_enabled:
                self.iam = LocalIam.from_synth()  # a synth the first time, then kept
            self._start_moto()
            self._env.only_endpoint(aws_env(self.aws_endpoint))
            RUNTIME.reset()
            self._provision()
            self._start_site()
            self._create_dev_tenant()
            self._start_functions()
            # Before anything polls them: a deploy's queues exist long before they are used.
            self._await_queues()
            self.live.start(self.functions, self.provisioned, self.iam)  # type: ignore[arg-type]
            # The first request should not pay for a cold start; workers start meanwhile.
            warming = self._prewarm()
            self._start_gateway()
            assert self.worker_settings is not None
            others = self.pools if self.every_pool else ()
            self._workers.start_all(self.worker_settings, self.iam, self.workers, others)
            self._await(warming)
            assert self.provisioned is not None
            rules = (self.strict or StrictRules()).effective()
            self.sources = EventSources(
                self.functions,
                jobs_table=self.provisioned.jobs_table,
                dlq_urls=self.provisioned.dlq_urls,
                sweeper_interval_s=self.sweeper_interval_s,
                schedule_group=self.provisioned.schedule_group,
                scheduler_dlq_url=self.provisioned.scheduler_dlq_url,
                iam=self.iam,
                duplicate_share=rules.invocation_duplicate_share,
            ).start()
            self._workers.check_started()
        except (SynthFailed, WorkerStartFailed) as exc:
            self.stop()
            raise StackError(str(exc)) from exc
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop everything this stack started; safe to call twice and after a failed start."""
        # The workers drain (~1-2 s, their last long polls) while the rest stops.
        self._workers.request_stop()
        sources, gateway, self.sources = self.sources, self.gateway, None
        stop_together(part.stop for part in (sources, gateway, self.live) if part is not None)
        if self._moto_sock is not None:  # never handed to moto
            self._moto_sock.close()
        if self._api_sock is not None:  # never handed to the gateway
            self._api_sock.close()
            self._api_sock = None
        functions, self.functions = list(self.functions.values()), {}
        for function in functions:
            with contextlib.suppress(Exception):
                function.close()
        with contextlib.suppress(Exception):
            self._workers.stop()
        if self.moto is not None:
            with contextlib.suppress(Exception):
                self.moto.stop(grace_s=5)
            self.moto = None
        if self.site is not None:
            with contextlib.suppress(Exception):
                self.site.stop()
            self.site = None
        self.gateway = None
        self.rest_api = None
        self._env.restore()
        RUNTIME.reset()
        self._started = False

    def cleanup_logs(self) -> None:
        if self._own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    # --- parts ---------------------------------------------------------------------------------
    def _start_moto(self) -> None:
        held, self._moto_sock = self._moto_sock, None
        env = {**self.iam.moto_env(), **(to_env(self.strict) if self.strict else {})}
        if self.sts_lifetime_s is not None:
            env[LIFETIME_ENV] = str(self.sts_lifetime_s)
        self.moto = spawn_moto(self.moto_port, held, env, self.log_dir / "moto.log")
        failed = wait_for_moto(self.moto, self.aws_endpoint, self.start_timeout_s)
        if failed:
            raise StackError(failed)

    def _await_queues(self) -> None:
        """The stack's queues once usable (a deploy's are long before anything uses them)."""
        assert self.provisioned is not None
        try:
            self.provisioned.await_queues(RUNTIME.client("sqs"), timeout_s=self.start_timeout_s)
        except QueuesNotSettled as exc:
            raise StackError(f"the stack's {exc}") from exc

    def _provision(self) -> None:
        self.provisioned = create_all(
            RUNTIME.client("dynamodb"),
            RUNTIME.client("sqs"),
            RUNTIME.client("s3"),
            scheduler=RUNTIME.client("scheduler"),
            settle_timeout_s=None,  # waited for later, while the site and functions start
            pools=[offer.name for offer in self.pools],
        )
        settings = local_settings(
            self.provisioned,
            self.live,
            concurrency=self.concurrency,
            job_role_arn=create_job_role(RUNTIME.client("iam")),
            console_url=self._console_base(),
            pools=self.pools,
        )
        self.core_settings = settings.core
        self.api_settings, self.worker_settings = settings.api, settings.worker
        # In-process code that asks RUNTIME for settings (tests, benchmarks) finds the API's;
        # the functions get theirs explicitly (devstack.functions).
        self._env.set(dict(to_env(self.api_settings)))
        RUNTIME.reset()

    def _start_site(self) -> None:
        try:
            self.site = DemoSite(self.site_port).start()
        except OSError as exc:
            raise StackError(
                f"cannot serve the demo site on 127.0.0.1:{self.site_port} ({exc.strerror}); "
                "pick another port with --site-port"
            ) from exc

    def _create_dev_tenant(self) -> None:
        assert self.provisioned is not None
        self.dev_api_key, _ = create_api_key(
            RUNTIME.tenant_store(self.provisioned.tenants_table), DEV_TENANT, name="local-dev"
        )

    def create_tenant_key(self, tenant_id: str, name: str = "default", admin: bool = False) -> str:
        assert self.provisioned is not None
        key, _ = create_api_key(
            RUNTIME.tenant_store(self.provisioned.tenants_table), tenant_id, name=name, admin=admin
        )
        return key

    def _start_functions(self) -> None:
        self.functions = local_functions(
            self.core_settings,
            aws_env(self.aws_endpoint),
            log_dir=self.log_dir,
            extra_env={**self.live.lambda_env, **self.lambda_env},
            iam=self.iam,
        )

    def _prewarm(self) -> list[Future[None]]:
        """One warm environment of the API and of the authorizer, started in the background."""
        pool = ThreadPoolExecutor(2, thread_name_prefix="prewarm")
        warming = [pool.submit(self.functions[name].prewarm) for name in ("api", "authorizer")]
        pool.shutdown(wait=False)  # the threads finish their one task each, then end
        return warming

    def _await(self, warming: list[Future[None]]) -> None:
        for started in warming:
            with contextlib.suppress(FutureTimeout):  # slow, not broken: the first call waits
                if (error := started.exception(self.start_timeout_s)) is not None:
                    raise StackError(f"a Lambda function did not start: {error}") from error

    def function_logs(self) -> dict[str, Path]:
        """Each Lambda function's log file (all its execution environments append to it)."""
        return {name: function.log_path for name, function in self.functions.items()}

    def _start_gateway(self) -> None:
        self.rest_api = pagefleet_rest_api(self.functions, authorizer_ttl_s=self.authorizer_ttl_s)
        try:
            apps: list[App] = [local_console(self.live.url, self.aws_endpoint), self.rest_api]
            held, self._api_sock = self._api_sock, None
            self.gateway = LocalGateway(apps, port=self.api_port, sock=held).start()
        except OSError as exc:
            raise StackError(
                f"cannot serve the API on 127.0.0.1:{self.api_port} ({exc.strerror}); "
                "pick another port with --api-port"
            ) from exc

    def start_worker(self, extra_env: Mapping[str, str] | None = None) -> ManagedProcess:
        """Start one more worker (chaos tests replace killed ones); ``extra_env`` goes over
        ``worker_env``. Every worker this stack started is stopped by ``stop()``."""
        assert self.worker_settings is not None
        return self._workers.start(self.worker_settings, self.iam, extra_env)

    @property
    def worker_processes(self) -> list[ManagedProcess]:
        return self._workers.processes

    @property
    def worker_pools(self) -> dict[str, str]:
        """Each worker's id -> the pool it serves."""
        return self._workers.pools

    def protected_workers(self) -> set[str]:
        """The workers whose task is protected from scale-in now (by its ECS agent)."""
        return {worker for worker, agent in self._workers.agents.items() if agent.protected()}

    def iam_report(self) -> dict[str, Any]:
        """The calls checked per principal and every denial (``devstack.iam.guard``)."""
        return self.iam.report(self.aws_endpoint)

    def dead_children(self) -> list[ManagedProcess]:
        """Children that exited on their own (the CLI reports them while running)."""
        children = [*self.worker_processes, *([self.moto] if self.moto else [])]
        return [p for p in children if not p.alive()]

    # --- clients -------------------------------------------------------------------------------
    def client(self, api_key: str | None = None) -> PagefleetClient:
        return PagefleetClient(self.api_url, api_key or self.dev_api_key)
