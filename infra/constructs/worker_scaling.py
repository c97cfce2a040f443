"""How a worker pool's task count follows its queues (see browser_workers.py's docstring)."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from constructs import Construct

from infra.config import PoolConfig

from .job_queues import PoolQueue


def autoscale(
    scope: Construct,
    cluster: ecs.ICluster,
    pool_id: str,
    pool: PoolConfig,
    queue: PoolQueue,
    service: ecs.FargateService,
) -> ecs.ScalableTaskCount:
    """Step scaling on the pool's oldest job, target tracking on its backlog per task and,
    unless turned off, a step scale-in when the pool is idle."""
    scaling = service.auto_scale_task_count(
        min_capacity=pool.min_tasks, max_capacity=pool.max_tasks
    )
    steps = [
        appscaling.ScalingInterval(lower=lower, upper=upper, change=change)
        for lower, upper, change in pool.age_intervals()
    ]
    # Every queue of the pool counts: the oldest job of any priority.
    ages = {
        f"age{i}": q.metric_approximate_age_of_oldest_message(
            period=Duration.minutes(1), statistic="Maximum"
        )
        for i, q in enumerate(queue.queues)
    }
    scaling.scale_on_metric(
        "ScaleOnOldestAge",
        metric=cloudwatch.MathExpression(
            expression=f"MAX([{', '.join(ages)}])",
            using_metrics=dict(ages),
            period=Duration.minutes(1),
            label="oldest job of the pool (s)",
        ),
        scaling_steps=steps,
        adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
        cooldown=Duration.seconds(pool.step_cooldown_seconds),
        evaluation_periods=1,
    )
    _track_backlog_per_task(scope, cluster, pool_id, pool, queue, service, scaling)
    if pool.idle_scale_in_percent is not None:
        _scale_in_when_idle(cluster, pool, queue, service, scaling)
    return scaling


# jobs queued and running (every queue of the pool) per running task (none running: per
# one task).
LOAD_EXPRESSION = "jobs / IF(FILL(running, 0) > 0, FILL(running, 0), 1)"


def _scale_in_when_idle(
    cluster: ecs.ICluster,
    pool: PoolConfig,
    queue: PoolQueue,
    service: ecs.FargateService,
    scaling: ecs.ScalableTaskCount,
) -> None:
    """Halve (``idle_scale_in_percent``) an idle pool each minute: target tracking
    alone waits 15 quiet minutes, every task billed (bench/scale_sim.py)."""
    assert pool.idle_scale_in_percent is not None
    minute = Duration.minutes(1)
    counts: dict[str, cloudwatch.IMetric] = {}
    for i, q in enumerate(queue.queues):
        counts[f"visible{i}"] = q.metric_approximate_number_of_messages_visible(
            period=minute, statistic="Average"
        )
        counts[f"inflight{i}"] = q.metric_approximate_number_of_messages_not_visible(
            period=minute, statistic="Average"
        )
    jobs = cloudwatch.MathExpression(
        expression=" + ".join(f"FILL({name}, 0)" for name in counts),
        using_metrics=counts,
        label="Jobs queued and running",
        period=minute,
    )
    load = cloudwatch.MathExpression(
        expression=LOAD_EXPRESSION,
        using_metrics={"jobs": jobs, "running": running_tasks(cluster, service)},
        label="Jobs queued and running per task",
        period=minute,
    )
    scaling.scale_on_metric(
        "ScaleInWhenIdle",
        metric=load,
        scaling_steps=[
            appscaling.ScalingInterval(upper=pool.idle_load, change=-pool.idle_scale_in_percent),
            appscaling.ScalingInterval(lower=pool.idle_load, change=0),
        ],
        adjustment_type=appscaling.AdjustmentType.PERCENT_CHANGE_IN_CAPACITY,
        cooldown=Duration.seconds(pool.step_cooldown_seconds),
        evaluation_periods=pool.idle_minutes,
    )


# visible jobs (every queue of the pool) per running task; with no task running, per one
# task, so 0 -> 1 scales.
BACKLOG_EXPRESSION = "visible / IF(FILL(running, 0) > 0, FILL(running, 0), 1)"


def _track_backlog_per_task(
    scope: Construct,
    cluster: ecs.ICluster,
    pool_id: str,
    pool: PoolConfig,
    queue: PoolQueue,
    service: ecs.FargateService,
    scaling: ecs.ScalableTaskCount,
) -> None:
    """Target tracking on a metric-math backlog (the L2 accepts only plain metrics)."""
    target = scaling.node.find_child("Target")
    assert isinstance(target, appscaling.ScalableTarget)
    cfn = appscaling.CfnScalingPolicy

    def stat(
        namespace: str, name: str, dimensions: dict[str, str], query_id: str
    ) -> appscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty:
        return cfn.TargetTrackingMetricDataQueryProperty(
            id=query_id,
            return_data=False,
            metric_stat=cfn.TargetTrackingMetricStatProperty(
                stat="Average",
                metric=cfn.TargetTrackingMetricProperty(
                    namespace=namespace,
                    metric_name=name,
                    dimensions=[
                        cfn.TargetTrackingMetricDimensionProperty(name=k, value=v)
                        for k, v in dimensions.items()
                    ],
                ),
            ),
        )

    cfn(
        scope,
        f"{pool_id}TrackBacklogPerTask",
        policy_name=f"{Stack.of(scope).stack_name}-{pool_id}-backlog-per-task",
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.scalable_target_id,
        target_tracking_scaling_policy_configuration=cfn.TargetTrackingScalingPolicyConfigurationProperty(
            target_value=pool.backlog_target,
            scale_out_cooldown=pool.scale_out_cooldown_seconds,
            scale_in_cooldown=pool.scale_in_cooldown_seconds,
            customized_metric_specification=cfn.CustomizedMetricSpecificationProperty(
                metrics=[
                    *[
                        stat(
                            "AWS/SQS",
                            "ApproximateNumberOfMessagesVisible",
                            {"QueueName": q.queue_name},
                            f"visible{i}",
                        )
                        for i, q in enumerate(queue.queues)
                    ],
                    cfn.TargetTrackingMetricDataQueryProperty(
                        id="visible",
                        expression=" + ".join(
                            f"FILL(visible{i}, 0)" for i in range(len(queue.queues))
                        ),
                        return_data=False,
                    ),
                    stat(
                        "ECS/ContainerInsights",
                        "RunningTaskCount",
                        {
                            "ClusterName": cluster.cluster_name,
                            "ServiceName": service.service_name,
                        },
                        "running",
                    ),
                    cfn.TargetTrackingMetricDataQueryProperty(
                        id="backlog",
                        expression=BACKLOG_EXPRESSION,
                        label="Backlog per task",
                        return_data=True,
                    ),
                ]
            ),
        ),
    )


def running_tasks(cluster: ecs.ICluster, service: ecs.FargateService) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace="ECS/ContainerInsights",
        metric_name="RunningTaskCount",
        dimensions_map={
            "ClusterName": cluster.cluster_name,
            "ServiceName": service.service_name,
        },
        period=Duration.minutes(1),
        statistic="Average",
    )
