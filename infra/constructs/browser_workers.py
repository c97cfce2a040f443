"""Browser workers: ECS cluster and one Fargate service per pool, scaled on queue age.

Network: a VPC whose worker subnets reach target sites either through NAT gateways or
directly (``worker_network``).

Scaling (``worker_scaling``): step scaling on ``ApproximateAgeOfOldestMessage`` adds tasks
fast when jobs wait, target tracking on visible messages per running task follows the
backlog both ways, between the pool's warm minimum and its maximum; a pool at zero starts a
task on its first waiting job, and an idle pool is halved each minute. A job's message is
deleted once claimed, so these see jobs that wait, never jobs that run. Scale-in never kills
a job: the worker turns on ECS task scale-in protection while it has jobs in flight and
drains on SIGTERM within ``stopTimeout``.

Metrics: the worker prints EMF (Powertools Metrics) to stdout; a FireLens (Fluent Bit)
router ships the container logs with ``log_format json/emf`` so CloudWatch extracts them,
and ``log_key log`` so each event is the line the worker printed (FireLens wraps it in a
record, ``{"log": "<line>", "source": "stdout", ...}``, whose ``_aws`` CloudWatch would not
find).

First create: a service starts tasks as soon as it exists, and CloudFormation only orders
what a resource refers to. Each service also waits for the cluster's capacity providers
(its strategy names them), the default routes of its subnets (NAT or internet gateway)
and the VPC endpoints (ECR, Logs, S3...) its tasks pull and log through.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct, IDependable

from infra import grants
from infra.config import StageConfig
from infra.nag import acknowledge, resource_text
from infra.pool_config import PoolConfig
from infra.runtime_env import settings_env
from pagefleet.specs.metrics_names import NAMESPACE_ENV, WORKER_SERVICE, stage_namespace
from pagefleet.specs.resources import AUDIT_PK_PREFIX
from pagefleet.specs.settings import WORKER_PROCESS_ENV, WorkerSettings, env_name

from .api import pricing_worker
from .artifacts import ArtifactsBucket
from .job_queues import JobQueues, PoolQueue
from .job_store import JobStore
from .lambda_factory import REPO_ROOT
from .tenant_isolation import TenantIsolation
from .worker_network import fixed_ip_subnets, interface_endpoints, worker_vpc
from .worker_scaling import autoscale, running_tasks

DOCKERFILE = "browser_task/Dockerfile"
# AWS for Fluent Bit, the FireLens router; "stable" is AWS's vetted release tag.
FLUENT_BIT_IMAGE = "public.ecr.aws/aws-observability/aws-for-fluent-bit:stable"
# Chromium, Playwright's driver and downloads need somewhere writable under a read-only root.
# Each is an empty bind-mount volume on Fargate, root-owned 0755 unless the image declares
# the path as a VOLUME (the Dockerfile does, owned by the worker's user).
WRITABLE_PATHS = {"tmp": "/tmp", "home": "/home/pwuser"}  # noqa: S108
HEALTH_CHECK = ["CMD", "python", "-m", "browser_task.observe.health"]


@dataclass(frozen=True)
class WorkerPool:
    name: str
    config: PoolConfig
    queue: PoolQueue
    service: ecs.FargateService
    task_definition: ecs.FargateTaskDefinition
    scaling: ecs.ScalableTaskCount
    container: ecs.ContainerDefinition


class BrowserWorkers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        store: JobStore,
        queues: JobQueues,
        artifacts: ArtifactsBucket,
        queue_urls_json: str,
        tenants: TenantIsolation,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._tenants = tenants
        self.vpc = worker_vpc(self, config)
        self.own_subnets = fixed_ip_subnets(self, self.vpc, config)
        self.security_group = ec2.SecurityGroup(
            self,
            "WorkerSecurityGroup",
            vpc=self.vpc,
            description="pagefleet browser workers: no inbound, outbound to target sites",
            allow_all_outbound=True,
        )
        if config.egress == "nat":
            self.endpoint_security_group = interface_endpoints(self, self.vpc, self.security_group)
        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            vpc=self.vpc,
            container_insights_v2=ecs.ContainerInsights.ENABLED,
        )
        # Fargate and Fargate Spot, associated here rather than by CDK's
        # enable_fargate_capacity_providers, which adds the association at synth time, too
        # late for the services to depend on it. Same scope and id: same logical id.
        self.capacity_providers = ecs.CfnClusterCapacityProviderAssociations(
            self.cluster,
            "Cluster",
            cluster=self.cluster.cluster_name,
            capacity_providers=["FARGATE", "FARGATE_SPOT"],
            default_capacity_provider_strategy=[],
        )
        # One image per architecture the pools run on (the stage's keeps the id "Image").
        self.images: dict[str, ecr_assets.DockerImageAsset] = {}
        for arch in sorted(
            {config.architecture_of(name) for name in config.pool_names},
            key=lambda a: a != config.worker_architecture,
        ):
            self.images[arch] = ecr_assets.DockerImageAsset(
                self,
                "Image" if arch == config.worker_architecture else f"Image{arch.capitalize()}",
                directory=str(REPO_ROOT),
                file=DOCKERFILE,
                platform=ecr_assets.Platform.LINUX_ARM64
                if arch == "arm64"
                else ecr_assets.Platform.LINUX_AMD64,
            )
        self.pools: dict[str, WorkerPool] = {}
        for pool_config in config.pools:
            name = pool_config.name
            self.pools[name] = self._pool(
                name,
                pool_config,
                queues.pools[name],
                store=store,
                artifacts=artifacts,
                queue_urls_json=queue_urls_json,
            )

    def _pool(
        self,
        name: str,
        pool: PoolConfig,
        queue: PoolQueue,
        *,
        store: JobStore,
        artifacts: ArtifactsBucket,
        queue_urls_json: str,
    ) -> WorkerPool:
        config = self._config
        pool_id = name.capitalize()
        subnets = self._subnets(name)
        log_group = logs.LogGroup(self, f"{pool_id}Logs", retention=config.log_retention)
        task_role = iam.Role(
            self,
            f"{pool_id}TaskRole",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description=f"pagefleet browser worker, pool {name}",
        )
        task_definition = ecs.FargateTaskDefinition(
            self,
            f"{pool_id}Task",
            cpu=pool.cpu,
            memory_limit_mib=pool.memory_mib,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64
                if config.architecture_of(name) == "arm64"
                else ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
            task_role=task_role,
        )
        task_definition.add_firelens_log_router(
            "LogRouter",
            image=ecs.ContainerImage.from_registry(FLUENT_BIT_IMAGE),
            firelens_config=ecs.FirelensConfig(type=ecs.FirelensLogRouterType.FLUENTBIT),
            logging=ecs.LogDrivers.aws_logs(stream_prefix="firelens", log_group=log_group),
            memory_reservation_mib=64,
            essential=True,
        )
        linux = ecs.LinuxParameters(self, f"{pool_id}Linux", init_process_enabled=True)
        linux.drop_capabilities(ecs.Capability.ALL)
        worker = task_definition.add_container(
            "Worker",
            image=ecs.ContainerImage.from_docker_image_asset(
                self.images[config.architecture_of(name)]
            ),
            essential=True,
            readonly_root_filesystem=True,
            linux_parameters=linux,
            # Replaces a task whose poll loop stopped (browser_task.observe.health); the start
            # period covers the browser's launch before the first poll.
            health_check=ecs.HealthCheck(
                command=HEALTH_CHECK,
                interval=Duration.seconds(30),
                timeout=Duration.seconds(10),
                retries=3,
                start_period=Duration.seconds(120),
            ),
            stop_timeout=Duration.seconds(config.worker_stop_timeout_seconds),
            logging=ecs.LogDrivers.firelens(
                options={
                    "Name": "cloudwatch_logs",
                    "region": Aws.REGION,
                    "log_group_name": log_group.log_group_name,
                    "log_stream_prefix": "worker/",
                    "auto_create_group": "false",
                    "log_format": "json/emf",
                    "log_key": "log",
                }
            ),
            environment={
                **settings_env(
                    WorkerSettings,
                    jobs_table=store.jobs.table_name,
                    tenants_table=store.tenants.table_name,
                    artifacts_bucket=artifacts.bucket.bucket_name,
                    queue_urls=queue_urls_json,
                    stage=config.stage,
                    pool=name,
                    concurrency=str(pool.concurrency),
                    max_waiting_contexts=str(pool.max_waiting_contexts),
                    spare_context=str(pool.spare_context).lower(),
                    max_browser_rss_mb=str(pool.browser_rss_limit_mb),
                    lease_seconds=str(queue.by_priority[0].spec.visibility_timeout_s),
                    # Chromium's sandbox needs user namespaces, which Fargate's seccomp
                    # profile refuses to a non-root task: the worker would not start
                    # ("No usable sandbox"). The task is the isolation (see the Dockerfile).
                    chromium_sandbox="false",
                    usage_table=store.usage.table_name,
                    tenant_defaults=config.tenant_defaults.model_dump_json(),
                    job_role_arn=self._tenants.role.role_arn,
                    isolation=pool.isolation,
                    # Each step's share of the job's price, priced as usage is (run events).
                    pricing_worker=json.dumps(pricing_worker(config)),
                ),
                "POWERTOOLS_SERVICE_NAME": WORKER_SERVICE,
                NAMESPACE_ENV: stage_namespace(config.stage),
                **WORKER_PROCESS_ENV,
            },
            secrets=self._proxy_secret(pool),
        )
        for volume, path in WRITABLE_PATHS.items():
            task_definition.add_volume(name=volume)
            worker.add_mount_points(
                ecs.MountPoint(source_volume=volume, container_path=path, read_only=False)
            )

        # Least privilege: this pool's queue, the jobs it moves, its tenants' counters; tenant
        # data (artifacts, sessions, secrets) only through the job role (TenantIsolation).
        log_group.grant_write(task_role)
        grants.table(task_role, store.jobs, grants.JOBS_WORKER)
        grants.table(task_role, store.tenants, grants.TENANTS_QUOTA)
        # One audit record of its own: a takeover that returned after its idle time
        # (browser_task.run.takeover), in the audit partitions only.
        task_role.add_to_policy(
            iam.PolicyStatement(
                sid="AuditTakeoverReturns",
                actions=["dynamodb:PutItem"],
                resources=[store.tenants.table_arn],
                conditions={
                    "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{AUDIT_PK_PREFIX}*"]}
                },
            )
        )
        for pool_queue in queue.queues:
            grants.queue(task_role, pool_queue, grants.QUEUE_CONSUME)
        # Artifacts, sessions and secrets only through the job role (tagged per tenant).
        self._tenants.trust(task_role)
        stack = Stack.of(self)
        # Scale-in protection through $ECS_AGENT_URI/task-protection/v1/state.
        tasks_arn = stack.format_arn(
            service="ecs", resource="task", resource_name=f"{self.cluster.cluster_name}/*"
        )
        task_role.add_to_policy(
            iam.PolicyStatement(
                actions=["ecs:UpdateTaskProtection", "ecs:GetTaskProtection"],
                resources=[tasks_arn],
            )
        )

        acknowledge(
            task_role,
            f"IAM5[Resource::{resource_text(self, tasks_arn)}]",
            "Task scale-in protection for its own task: task ids are only known at run time, "
            "the grant is limited to this cluster's tasks.",
        )
        acknowledge(
            task_definition.obtain_execution_role(),
            "IAM5[Resource::*]",
            "ecr:GetAuthorizationToken has no resource-level permissions (image pulls "
            "themselves are granted on the asset repository).",
        )
        acknowledge(
            task_definition,
            "ECS2",
            "The environment holds resource names and tuning only (PAGEFLEET_* settings, "
            "the allocator's MALLOC_ARENA_MAX); "
            "secrets are fetched by name from Secrets Manager at run time.",
        )

        service = ecs.FargateService(
            self,
            f"{pool_id}Service",
            cluster=self.cluster,
            task_definition=task_definition,
            # No desired count: CloudFormation would reset it to this number on every
            # deploy, undoing autoscaling. Created at 1, the scalable target's min/max bound it.
            min_healthy_percent=100,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
            vpc_subnets=subnets,
            security_groups=[self.security_group],
            assign_public_ip=config.subnets_of(name) == "public",
            capacity_provider_strategies=[
                ecs.CapacityProviderStrategy(
                    capacity_provider="FARGATE_SPOT" if pool.spot else "FARGATE", weight=1
                )
            ],
            platform_version=ecs.FargatePlatformVersion.LATEST,
            propagate_tags=ecs.PropagatedTagSource.SERVICE,
            enable_ecs_managed_tags=True,
        )
        service.node.add_dependency(*self._ready_for_tasks(subnets))
        scaling = autoscale(
            self,
            self.cluster,
            pool_id,
            pool,
            queue,
            service,
            namespace=stage_namespace(self._config.stage),
        )
        return WorkerPool(name, pool, queue, service, task_definition, scaling, worker)

    def _subnets(self, pool: str) -> ec2.SubnetSelection:
        """Where ``pool``'s tasks run: the stage's private (NAT) or public subnets."""
        where = self._config.subnets_of(pool)
        if where == "own":
            return ec2.SubnetSelection(subnets=self.own_subnets[pool])
        return ec2.SubnetSelection(
            subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS
            if where == "private"
            else ec2.SubnetType.PUBLIC
        )

    def _proxy_secret(self, pool: PoolConfig) -> dict[str, ecs.Secret]:
        """A proxy pool's secret, put into its worker's settings when a task starts."""
        if pool.proxy_secret is None:
            return {}
        ref = pool.proxy_secret
        secret = (
            secretsmanager.Secret.from_secret_complete_arn(
                self, f"{pool.name.capitalize()}Proxy", ref
            )
            if ref.startswith("arn:")
            else secretsmanager.Secret.from_secret_name_v2(
                self, f"{pool.name.capitalize()}Proxy", ref
            )
        )
        return {env_name(WorkerSettings, "egress_proxy"): ecs.Secret.from_secrets_manager(secret)}

    def _ready_for_tasks(self, subnets: ec2.SubnetSelection) -> list[IDependable]:
        """What a task needs before it can start: capacity providers, routes, endpoints."""
        routes = [
            subnet.internet_connectivity_established
            for subnet in self.vpc.select_subnets(
                subnet_type=subnets.subnet_type, subnets=subnets.subnets
            ).subnets
        ]
        endpoints = [c for c in self.vpc.node.find_all() if isinstance(c, ec2.CfnVPCEndpoint)]
        return [self.capacity_providers, *routes, *endpoints]

    def running_tasks(self, service: ecs.FargateService) -> cloudwatch.Metric:
        return running_tasks(self.cluster, service)
