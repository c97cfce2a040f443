"""Stage configuration (dev, prod, and an ap-south-1 example): what each setting means and
each stage's defaults. A worker pool's settings are ``infra.pool_config``; how a synth
chooses its stage and merges the deploy file over it is ``infra.deploy_file``.

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
from typing import Literal

from aws_cdk import aws_logs as logs
from pydantic import Field, model_validator

from infra.pool_config import DeployModel, PoolConfig
from pagefleet.specs.pools import Egress, PoolOffer
from pagefleet.specs.resources import DEFAULT_POOL, TABLES
from pagefleet.specs.tenant_defaults import LimitDefaults


class ConsoleConfig(DeployModel):
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


class StageConfig(DeployModel):
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
            ).model_dump(mode="json", exclude_defaults=True)  # a function's env holds 4 KB
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
    def fixed_ip_pools(self) -> list[str]:
        """The pools with their own subnets, NAT gateway and Elastic IP, in declared order."""
        return [p for p in self.pool_names if self.subnets_of(p) == "own"]

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
        own = self.fixed_ip_pools
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
