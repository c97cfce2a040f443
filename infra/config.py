"""Stage configuration (dev, prod, and an ap-south-1 example), chosen by CDK context.

``cdk deploy -c pagefleet:stage=prod`` selects a stage. A deployment's own settings (its
alarm e-mail, a restored table, who owns the API Gateway account setting) live in the
deploy file, ``pagefleet.deploy.json`` at the repository's root (``{"<stage>": {...}}``,
not committed; ``pagefleet.deploy.example.json`` is), read on every synth, so no later
command drops them. ``-c pagefleet:deployFile=PATH`` reads another one. ``-c
pagefleet:overrides='{...}'`` merges JSON over both, for one deploy only. The data
resources' own settings (keys, visibility, maxReceiveCount, lifecycle days) are not here:
they live in ``pagefleet.specs.resources`` so the local stack builds exactly the same ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from aws_cdk import aws_logs as logs
from constructs import Node
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagefleet.specs.pools import POOL_NAME_PATTERN, Egress, Isolation, PoolOffer
from pagefleet.specs.resources import DEFAULT_POOL, TABLES
from pagefleet.specs.tenant_defaults import LimitDefaults

STAGE_CONTEXT_KEY = "pagefleet:stage"
OVERRIDES_CONTEXT_KEY = "pagefleet:overrides"
DEPLOY_FILE_CONTEXT_KEY = "pagefleet:deployFile"
REPO_ROOT = Path(__file__).resolve().parents[1]
DEPLOY_FILE = REPO_ROOT / "pagefleet.deploy.json"
# Off for offline synth and tests; cdk.json turns it on so `cdk deploy` ships dependencies.
BUNDLE_CONTEXT_KEY = "pagefleet:bundleDependencies"
# An assembly synthesized without its Lambda dependencies is refused unless this says it is
# for inspection (tests, make synth, the deploy check): never for `cdk deploy`.
INSPECT_CONTEXT_KEY = "pagefleet:inspectOnly"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgeStep(_Model):
    """Add ``add_tasks`` when the oldest queued job has waited at least ``age_seconds``."""

    # The oldest waiting job's age, in seconds, from which this step applies.
    age_seconds: int = Field(ge=1)
    # Tasks this step adds (each minute the age stays at or above it).
    add_tasks: int = Field(ge=1)


# A Secrets Manager secret by name or complete ARN (the pool's proxy).
ARN_OF_SECRETS = r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:"
SECRET_NAME_OR_ARN = rf"^({ARN_OF_SECRETS})?[A-Za-z0-9/_+=.@-]+$"


class PoolConfig(_Model):
    # The pool's own name: its queues' keys ("<name>", "<name>-high"...), its resources' ids
    # and what a job's ``pool`` names. Renaming a pool replaces its queues and service.
    name: str = Field(pattern=POOL_NAME_PATTERN)
    cpu: int = Field(description="Fargate CPU units per task (1024 = 1 vCPU)")
    # Fargate memory per task, MiB (a size Fargate allows with ``cpu``).
    memory_mib: int
    # Browser slots per task: each slot runs one job in its own BrowserContext.
    concurrency: int = Field(ge=1, le=64)
    # Contexts of jobs waiting for a person (await_human) a task keeps open outside its slots
    # (their slots run other jobs meanwhile); past it a waiting job keeps its slot. Each is
    # a Chromium context in the task's memory (docs/decisions.md, 2026-12-05); 0: none.
    max_waiting_contexts: int = Field(default=2, ge=0, le=32)
    # Tasks kept running when no job waits (0: the first job waits for a task to start).
    min_tasks: int = Field(ge=0)
    # The most tasks scaling starts (the Fargate vCPU quota must hold twice this during a
    # rolling deploy: make deploy-check).
    max_tasks: int = Field(ge=1)
    # Step scaling on ApproximateAgeOfOldestMessage (of waiting jobs: a claimed job's
    # message is deleted); steps must be increasing in age.
    age_steps: tuple[AgeStep, ...] = (
        AgeStep(age_seconds=30, add_tasks=1),
        AgeStep(age_seconds=120, add_tasks=2),
        AgeStep(age_seconds=300, add_tasks=4),
    )
    # Target tracking on visible messages per running task; defaults to the slot count.
    backlog_per_task: int | None = None
    # Seconds the step policy waits after a scale-out before another.
    step_cooldown_seconds: int = Field(default=60, ge=0)
    # Seconds target tracking waits after a scale-out before another.
    scale_out_cooldown_seconds: int = Field(default=60, ge=0)
    # Seconds target tracking waits after a scale-in before another.
    scale_in_cooldown_seconds: int = Field(default=300, ge=0)
    # Target tracking scales in only after 15 quiet minutes. When set, a step policy also
    # removes this share of the tasks each minute once the jobs queued and running per
    # task have stayed under half a task's slots for ``idle_minutes`` (bench/scale_sim.py).
    idle_scale_in_percent: int | None = Field(default=50, ge=1, le=100)
    # Minutes a pool must stay idle (see idle_scale_in_percent) before it scales in.
    idle_minutes: int = Field(default=3, ge=1, le=15)
    # A pool with min_tasks 0 starts this many tasks in the minute its first job waits, and
    # adds no more from that policy for the cooldown (the desired count's datapoint lags).
    from_zero_tasks: int = Field(default=1, ge=1)
    # Seconds after a start from zero before that policy starts more.
    from_zero_cooldown_seconds: int = Field(default=180, ge=60)
    # Fargate Spot capacity (about 70 % off, tasks stopped at two minutes' notice): x86_64
    # workers only, AWS places no ARM64 task on Spot (refused at synth).
    spot: bool = False
    # This pool's CPU architecture; null: the stage's worker_architecture. A Spot pool on a
    # Graviton stage sets "x86_64" here and the others keep Graviton's price.
    architecture: Literal["x86_64", "arm64"] | None = None
    # How this pool's tasks reach sites; null: the stage's egress. "nat": the stage's NAT
    # gateways (a stage whose egress is "nat"); "public": a public IP per task; "fixed_ip":
    # subnets of the pool's own behind its own NAT gateway and Elastic IP (one address, the
    # stack output PoolEgressIp<Name>); "proxy": the HTTP proxy in proxy_secret, from the
    # stage's subnets.
    egress: Egress | None = None
    # For egress "proxy": a Secrets Manager secret (name or ARN) holding
    # {"host", "port", "username", "password"}; read when a task starts.
    proxy_secret: str | None = Field(default=None, pattern=SECRET_NAME_OR_ARN, max_length=2048)
    # "task": one job per task (concurrency 1) and a fresh browser for each job; "shared":
    # the task's slots share one browser, each job in its own context.
    isolation: Isolation = "shared"

    @model_validator(mode="after")
    def _check(self) -> PoolConfig:
        if self.min_tasks > self.max_tasks:
            raise ValueError("min_tasks > max_tasks")
        if self.isolation == "task" and self.concurrency != 1:
            raise ValueError(
                f"pool {self.name}: isolation task runs one job per task: set concurrency 1"
            )
        if (self.egress == "proxy") != (self.proxy_secret is not None):
            raise ValueError(
                f'pool {self.name}: egress "proxy" and proxy_secret go together (the secret '
                "holds the proxy's host, port, username and password)"
            )
        ages = [s.age_seconds for s in self.age_steps]
        if ages != sorted(set(ages)) or not ages:
            raise ValueError("age_steps must be non-empty and strictly increasing in age")
        return self

    @property
    def backlog_target(self) -> int:
        return self.backlog_per_task or self.concurrency

    def age_intervals(self) -> list[tuple[int | None, int | None, int]]:
        """The step policy on the oldest message's age: (lower s, upper s, tasks to add).

        Below the first step nothing happens (scale-in is the backlog policy's, and task
        protection guards running jobs); each step runs to the next one's age.
        """
        steps = self.age_steps
        out: list[tuple[int | None, int | None, int]] = [(None, steps[0].age_seconds, 0)]
        for index, step in enumerate(steps):
            upper = steps[index + 1].age_seconds if index + 1 < len(steps) else None
            out.append((step.age_seconds, upper, step.add_tasks))
        return out

    @property
    def browser_rss_limit_mb(self) -> int:
        """When the worker recycles its browser: summed RSS of its process tree, which
        counts shared pages once per process and so overstates what the task uses
        (docs/decisions.md, "Worker sizing from the memory figures")."""
        return int(self.memory_mib * 0.8)

    @property
    def idle_load(self) -> float:
        """Jobs queued and running per task below which the pool counts as idle."""
        return self.concurrency / 2


class ConsoleConfig(_Model):
    """The web console's CloudFront distribution (infra/constructs/console.py).

    A custom domain (none by default) needs an ACM certificate for it in us-east-1, given by
    ARN: CloudFront takes certificates from there only, whatever the stack's region. Without
    one the console is reached at the distribution's ``*.cloudfront.net`` name.
    """

    # The console's own domain (a CNAME to the distribution); needs certificate_arn.
    domain_name: str | None = Field(default=None, pattern=r"^[a-z0-9.-]+\.[a-z]{2,}$")
    # The ACM certificate for domain_name, in us-east-1 (CloudFront's region).
    certificate_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:acm:us-east-1:\d{12}:certificate/[\w-]+$"
    )
    # Edge locations served: 100 = North America and Europe (cheapest), 200, or All.
    price_class: Literal["PriceClass_100", "PriceClass_200", "PriceClass_All"] = "PriceClass_100"
    # Cache-Control max-age of the console's files (not content-hashed); a deploy also
    # invalidates /console/* so a release shows at once.
    cache_seconds: int = Field(default=300, ge=0, le=86400)

    @model_validator(mode="after")
    def _check(self) -> ConsoleConfig:
        if (self.domain_name is None) != (self.certificate_arn is None):
            raise ValueError("console domain_name and certificate_arn go together")
        return self


_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


# Pools with their own egress address each get a /20 of the VPC's second CIDR block (a /24
# per availability zone): 16 of them fill it.
MAX_FIXED_IP_POOLS = 16

# Lambda keeps this much of an account's concurrency unreserved: a reservation that would
# leave less fails the deploy (a new account's limit may be as low as 10).
LAMBDA_UNRESERVED_MINIMUM = 100


class StageConfig(_Model):
    # The stage's name: the stack is pagefleet-<stage>, and every name and metric namespace
    # carries it. Set by the stage chosen (-c pagefleet:stage=...), not in the deploy file.
    stage: str = Field(pattern=r"^[a-z][a-z0-9-]{1,30}$")
    # A fixed region for the stack (e.g. "ap-south-1"); None deploys to the CLI's region.
    region: str | None = None
    # prod keeps tables and the bucket on stack deletion; dev destroys them.
    retain_data: bool
    # Days every log group keeps its events (one of CloudWatch Logs' retention periods).
    log_retention_days: int
    # The worker pools, each with its own name, queues, Fargate service, scaling and alarms.
    # A deploy file's pools merge by name over the stage's: one with a new name is added.
    pools: tuple[PoolConfig, ...] = Field(min_length=1)
    # Worker egress to target sites: "nat" = private subnets behind NAT gateways,
    # "public" = public subnets with a public IP (no NAT cost, tasks still accept no inbound).
    egress: Literal["nat", "public"]
    # NAT gateways for egress="nat" (one per AZ for availability; each costs by the hour).
    nat_gateways: int = Field(default=1, ge=0)
    # Availability zones of the workers' VPC.
    max_azs: int = Field(default=2, ge=1)
    # Graviton: Fargate's arm64 vCPU-hour and GB-hour cost 20 % less than x86's, and the
    # worker's image is multi-arch (docs/decisions.md, "ARM64 workers"). x86_64 stays a
    # choice per stage: -c 'pagefleet:overrides={"worker_architecture": "x86_64"}'.
    worker_architecture: Literal["x86_64", "arm64"] = "arm64"
    # Fargate allows at most 120 s between SIGTERM and SIGKILL.
    worker_stop_timeout_seconds: int = Field(default=120, ge=2, le=120)
    # The REST stage's steady request rate, per second, over all clients (429 above).
    api_throttle_rate: float = 50
    # The REST stage's burst, in requests, over all clients.
    api_throttle_burst: int = 100
    # Seconds API Gateway keeps an API key's authorization: a revoked key works this long.
    authorizer_cache_seconds: int = Field(default=300, ge=0, le=3600)
    # The largest request body the API accepts, bytes (413 above).
    max_request_bytes: int = 256 * 1024
    # A WAF web ACL on the REST API (a request budget per client, AWS managed rules).
    waf: bool = True
    # Requests one client may make in 5 minutes before the WAF blocks it.
    waf_rate_limit_per_5min: int = Field(default=3000, ge=10)
    # Reserved concurrency by function name, where it protects something downstream. Only
    # deployable where the account's Lambda concurrency limit is at least
    # ``min_account_concurrency`` (checked below; `aws lambda get-account-settings`).
    reserved_concurrency: dict[str, int] = Field(default_factory=dict)
    # The account's Lambda concurrency limit, as you know it (reservations are checked
    # against it: Lambda keeps 100 unreserved).
    min_account_concurrency: int = Field(default=10, ge=10)
    # An address the stack subscribes to the alarm topic (confirm AWS's mail).
    alarm_email: str | None = None
    # Warn at synth when the alarm topic would have no subscriber (no alarm_email): set where
    # an alarm must reach someone. Turn it off if you subscribe the topic outside the stack.
    alarm_subscriber_required: bool = False
    # Who owns API Gateway's account-wide CloudWatch Logs role (one setting per account and
    # region): "stack" sets it; "existing" leaves it to its owner (another stack or an
    # operator) and logs through it (infra/constructs/api_account.py).
    api_gateway_account: Literal["stack", "existing"] = "stack"
    # Who owns ECR's registry scanning configuration (one per account and region): "stack"
    # sets scan-on-push for every repository, the worker image's included; "existing" leaves
    # it to its owner, e.g. Amazon Inspector's enhanced scanning
    # (infra/constructs/image_scanning.py).
    image_scanning: Literal["stack", "existing"] = "stack"
    # Seconds the oldest waiting job of a priority queue may wait before its alarm.
    oldest_age_alarm_seconds: int = 900
    # Percent of a pool's finished jobs failing in a 5-minute period (2 of 3 alarm).
    failure_rate_alarm_percent: float = 20
    # API 5xx answers a minute that count as a bad minute (3 of 5 alarm).
    api_5xx_alarm_count: int = 5
    # Lambda errors (per function, per minute) that count as a failing minute.
    lambda_errors_alarm_count: int = Field(default=1, ge=1)
    # DynamoDB read + write throttle events per table per minute that count as a bad minute.
    dynamodb_throttle_alarm_count: int = Field(default=10, ge=1)
    # Worker tasks stopped by a crash, failed start or failed health check in 15 minutes.
    task_stops_alarm_count: int = Field(default=3, ge=1)
    # AWS Backup of the tables (daily, this many days kept); None: PITR only.
    backup_retention_days: int | None = Field(default=None, ge=1)
    # Tables restored from a backup or PITR that the stack uses instead of its own, by logical
    # id ("JobsTable" / "TenantsTable" / "UsageTable"): see docs/runbooks.md, "Restore a table".
    restored_tables: dict[str, str] = Field(default_factory=dict)
    # Bundle the Lambda dependency layer with uv (cdk.json turns it on for cdk deploy; set
    # by -c pagefleet:bundleDependencies, not in the deploy file).
    bundle_dependencies: bool = False
    # The assembly is for inspection only (tests, make synth): allowed unbundled, never
    # deployable (-c pagefleet:inspectOnly=true).
    inspect_only: bool = False
    # The limits of a tenant an admin set none for (``pagefleet admin set-limits``).
    tenant_defaults: LimitDefaults = LimitDefaults()
    # Submissions refused by tenant limits in 5 minutes that count as a bad period.
    tenant_refusals_alarm_count: int = Field(default=500, ge=1)
    # The web console's distribution: custom domain, price class, caching (below).
    console: ConsoleConfig = ConsoleConfig()

    def pool_offers(self) -> str:
        """What each pool offers the jobs routed by ``requires`` (PAGEFLEET_POOLS)."""
        offers = [
            PoolOffer(
                name=pool.name,
                memory_mib=pool.memory_mib,
                slots=pool.concurrency,
                architecture=self.architecture_of(pool.name),
                spot=pool.spot,
                egress=self.egress_of(pool.name),
                region=self.region,
                isolation=pool.isolation,
            ).model_dump(mode="json")
            for pool in self.pools
        ]
        return json.dumps(offers, separators=(",", ":"))

    @property
    def pool_names(self) -> tuple[str, ...]:
        return tuple(pool.name for pool in self.pools)

    def pool(self, name: str) -> PoolConfig:
        """The pool called ``name`` (KeyError when the stage has none)."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(name)

    def architecture_of(self, pool: str) -> Literal["x86_64", "arm64"]:
        """The CPU architecture ``pool``'s tasks run on: its own, else the stage's."""
        return self.pool(pool).architecture or self.worker_architecture

    def egress_of(self, pool: str) -> Egress:
        """How ``pool``'s tasks reach sites: its own egress, else the stage's."""
        return self.pool(pool).egress or self.egress

    def subnets_of(self, pool: str) -> Literal["private", "public", "own"]:
        """Where ``pool``'s tasks run: the stage's private (NAT) subnets, its public ones,
        or the pool's own behind its own NAT gateway (fixed_ip). A proxy pool runs where the
        stage's egress puts tasks."""
        egress = self.egress_of(pool)
        if egress == "fixed_ip":
            return "own"
        if egress == "proxy":
            egress = self.egress
        return "private" if egress == "nat" else "public"

    @property
    def log_retention(self) -> logs.RetentionDays:
        return _RETENTION[self.log_retention_days]

    @model_validator(mode="after")
    def _pools_match_queues(self) -> StageConfig:
        if self.log_retention_days not in _RETENTION:
            raise ValueError(f"log_retention_days must be one of {sorted(_RETENTION)}")
        names = self.pool_names
        if len(set(names)) != len(names):
            raise ValueError(f"pools must have names of their own: {sorted(names)}")
        unknown_default = sorted(set(self.tenant_defaults.pools or ()) - set(names))
        if unknown_default:
            raise ValueError(
                f"tenant_defaults.pools names pools the stage lacks: {unknown_default}"
            )
        if DEFAULT_POOL not in names:
            raise ValueError(
                f'the pools must include "{DEFAULT_POOL}", where a job that names no pool runs'
            )
        spot_pools = sorted(
            pool.name
            for pool in self.pools
            if pool.spot and self.architecture_of(pool.name) == "arm64"
        )
        if spot_pools:
            # AWS: "Linux tasks with the ARM64 architecture don't support the Fargate Spot
            # capacity provider" (docs/decisions.md, "No Fargate Spot on Graviton").
            raise ValueError(
                f"pools {spot_pools} ask for Fargate Spot, which runs x86_64 tasks only, but "
                'their architecture is arm64: give each "architecture": "x86_64" (or the '
                'stage worker_architecture "x86_64") for Spot\'s discount, or "spot": false '
                "to keep Graviton's"
            )
        behind_nat = [p for p in self.pool_names if self.subnets_of(p) == "private"]
        if behind_nat and self.egress != "nat":
            # The stage's VPC has no private subnets; adding them would re-cut the public
            # subnets' address ranges, which CloudFormation cannot replace in place.
            raise ValueError(
                f'pools {behind_nat} ask for egress "nat", which needs the stage egress "nat" '
                '(its NAT gateways and private subnets): set the stage\'s "egress": "nat", or '
                'give those pools "public" or "proxy"'
            )
        if self.egress == "nat" and self.nat_gateways < 1:
            raise ValueError("egress=nat needs at least one NAT gateway")
        own = [p for p in self.pool_names if self.subnets_of(p) == "own"]
        if len(own) > MAX_FIXED_IP_POOLS:
            raise ValueError(
                f"at most {MAX_FIXED_IP_POOLS} pools may have a fixed_ip egress, not {len(own)}"
            )
        reserved = sum(self.reserved_concurrency.values())
        if reserved and reserved > self.min_account_concurrency - LAMBDA_UNRESERVED_MINIMUM:
            raise ValueError(
                f"reserved_concurrency totals {reserved}, but an account whose Lambda "
                f"concurrency limit is {self.min_account_concurrency} can reserve at most "
                f"{max(0, self.min_account_concurrency - LAMBDA_UNRESERVED_MINIMUM)} "
                f"(Lambda keeps {LAMBDA_UNRESERVED_MINIMUM} unreserved); raise "
                "min_account_concurrency after a quota increase, or reserve nothing"
            )
        unknown = set(self.restored_tables) - {t.logical_id for t in TABLES}
        if unknown:
            raise ValueError(f"restored_tables names unknown tables {sorted(unknown)}")
        return self


STAGES: dict[str, StageConfig] = {
    "dev": StageConfig(
        stage="dev",
        retain_data=False,
        log_retention_days=14,
        egress="public",
        nat_gateways=0,
        pools=(
            PoolConfig(
                name="standard", cpu=1024, memory_mib=2048, concurrency=2, min_tasks=1, max_tasks=4
            ),
            PoolConfig(
                name="heavy",
                cpu=2048,
                memory_mib=4096,
                concurrency=1,
                min_tasks=0,
                max_tasks=2,
                # One job per task and a fresh browser for each (what isolation "task" asks).
                isolation="task",
            ),
        ),
        waf=False,
        # A new account's concurrency limit may be 10: reserving would fail the deploy.
        reserved_concurrency={},
    ),
    "prod": StageConfig(
        stage="prod",
        retain_data=True,
        log_retention_days=90,
        egress="nat",
        nat_gateways=2,
        pools=(
            # 6 slots: docs/decisions.md, "Worker sizing from the memory figures".
            PoolConfig(
                name="standard", cpu=2048, memory_mib=4096, concurrency=6, min_tasks=2, max_tasks=20
            ),
            PoolConfig(
                name="heavy", cpu=4096, memory_mib=8192, concurrency=2, min_tasks=0, max_tasks=8
            ),
        ),
        api_throttle_rate=200,
        api_throttle_burst=400,
        # One sweeper at a time (dead letters are paced by each DLQ mapping's maximum
        # concurrency instead: infra/constructs/dead_letters.py). Needs an account limit of
        # 1,000 (the usual default; new accounts may start at 10: deploy with
        # -c 'pagefleet:overrides={"reserved_concurrency": {}}' until raised).
        reserved_concurrency={"sweeper": 1},
        min_account_concurrency=1000,
        backup_retention_days=35,
        tenant_defaults=LimitDefaults(submits_per_minute=300, max_queued=10_000, max_running=40),
        alarm_subscriber_required=True,
    ),
    # An example of a regional stage: prod's shape at a smaller scale, pinned to Mumbai.
    "ap-south-1": StageConfig(
        stage="ap-south-1",
        region="ap-south-1",
        retain_data=True,
        log_retention_days=30,
        egress="nat",
        nat_gateways=1,
        pools=(
            PoolConfig(
                name="standard", cpu=2048, memory_mib=4096, concurrency=6, min_tasks=1, max_tasks=8
            ),
            PoolConfig(
                name="heavy", cpu=4096, memory_mib=8192, concurrency=2, min_tasks=0, max_tasks=4
            ),
        ),
        backup_retention_days=35,
        alarm_subscriber_required=True,
    ),
}


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        # An empty object replaces: `{"reserved_concurrency": {}}` reserves nothing.
        if value and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        elif key == "pools" and isinstance(value, list | dict):
            out[key] = _merge_pools(list(out.get(key) or ()), _pool_list(value))
        else:
            out[key] = value
    return out


def _pool_list(pools: list[Any] | dict[str, Any]) -> list[Any]:
    """The deploy file's pools as a list: the older spelling, an object by name
    (``{"heavy": {"max_tasks": 4}}``), still reads."""
    if isinstance(pools, dict):
        return [
            {**(pool if isinstance(pool, dict) else {}), "name": name}
            for name, pool in pools.items()
        ]
    return pools


def _merge_pools(base: list[dict[str, Any]], extra: list[Any]) -> list[dict[str, Any]]:
    """Pools merged by name: a pool named like one of the stage's changes the fields it
    gives, a new name adds a pool. None is dropped by leaving it out: that would delete its
    queues with the jobs waiting in them."""
    out = [dict(pool) for pool in base]
    for pool in extra:
        if not isinstance(pool, dict) or not isinstance(pool.get("name"), str):
            raise ValueError(f'each of "pools" needs a "name": {pool!r}')
        same = next((i for i, known in enumerate(out) if known.get("name") == pool["name"]), None)
        if same is None:
            out.append(pool)
        else:
            out[same] = _deep_merge(out[same], pool)
    return out


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def deploy_settings(path: Path, stage: str) -> dict[str, Any]:
    """The deploy file's settings for ``stage`` (none if the file does not exist)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f'{path}: expected {{"<stage>": {{<settings>}}, ...}}')
    unknown = sorted(set(data) - set(STAGES))
    if unknown:
        raise ValueError(f"{path} names unknown stages {unknown}; expected {sorted(STAGES)}")
    return dict(data.get(stage, {}))


def load_config(node: Node) -> StageConfig:
    """The stage config selected by CDK context: the stage's defaults, then the deploy file's
    settings for it, then any JSON overrides."""
    stage = str(node.try_get_context(STAGE_CONTEXT_KEY) or "dev")
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {sorted(STAGES)}")
    data = STAGES[stage].model_dump()
    deploy_file = node.try_get_context(DEPLOY_FILE_CONTEXT_KEY)
    path = REPO_ROOT / deploy_file if deploy_file else DEPLOY_FILE
    data = _deep_merge(data, deploy_settings(path, stage))
    overrides = node.try_get_context(OVERRIDES_CONTEXT_KEY)
    if isinstance(overrides, str):
        overrides = json.loads(overrides)
    if overrides:
        data = _deep_merge(data, overrides)
    bundle = node.try_get_context(BUNDLE_CONTEXT_KEY)
    if bundle is not None:
        data["bundle_dependencies"] = _as_bool(bundle)
    inspect = node.try_get_context(INSPECT_CONTEXT_KEY)
    if inspect is not None:
        data["inspect_only"] = _as_bool(inspect)
    return StageConfig.model_validate(data)
