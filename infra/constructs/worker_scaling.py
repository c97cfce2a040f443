"""How a worker pool's task count follows its queues (see browser_workers.py's docstring).

Every signal here is of jobs that wait: a job's message is deleted once its claim is
written, so the queues' ages and visible counts never include a running job (a 20-minute
job used to look like a 20-minute-old backlog). The one policy that must see running jobs,
the idle scale-in, reads them from the workers' ``SlotsBusy`` gauge, never from SQS's
in-flight count.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from constructs import Construct

from infra.pool_config import PoolConfig
from pagefleet.specs import metrics_names as m

from .job_queues import PoolQueue


def autoscale(
    scope: Construct,
    cluster: ecs.ICluster,
    pool_id: str,
    pool: PoolConfig,
    queue: PoolQueue,
    service: ecs.FargateService,
    *,
    namespace: str,
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
            label="oldest waiting job of the pool (s)",
        ),
        scaling_steps=steps,
        adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
        cooldown=Duration.seconds(pool.step_cooldown_seconds),
        evaluation_periods=1,
    )
    _track_backlog_per_task(scope, cluster, pool_id, pool, queue, service, scaling)
    if pool.idle_scale_in_percent is not None:
        _scale_in_when_idle(cluster, pool, queue, service, scaling, namespace)
    if pool.min_tasks == 0:
        _start_from_zero(cluster, pool, queue, service, scaling)
    return scaling


def _visible(queue: PoolQueue, statistic: str) -> cloudwatch.MathExpression:
    """Jobs waiting in every queue of the pool (high, normal, low)."""
    counts = {
        f"visible{i}": q.metric_approximate_number_of_messages_visible(
            period=Duration.minutes(1), statistic=statistic
        )
        for i, q in enumerate(queue.queues)
    }
    return cloudwatch.MathExpression(
        expression=" + ".join(f"FILL({name}, 0)" for name in counts),
        using_metrics=dict(counts),
        label="Jobs waiting",
        period=Duration.minutes(1),
    )


# Jobs waiting (visible) when the pool has no task desired; 0 otherwise. A missing desired
# count counts as none: at worst one task too many, never a pool that cannot start.
FROM_ZERO_EXPRESSION = "IF(FILL(desired, 0) < 1, waiting, 0)"


def _start_from_zero(
    cluster: ecs.ICluster,
    pool: PoolConfig,
    queue: PoolQueue,
    service: ecs.FargateService,
    scaling: ecs.ScalableTaskCount,
) -> None:
    """A pool at zero tasks starts one on the first waiting job, in the minute it arrives,
    not when it has waited ``age_steps[0]`` (bench/scale_sim.py prints both)."""
    desired = cloudwatch.Metric(
        namespace="ECS/ContainerInsights",
        metric_name="DesiredTaskCount",
        dimensions_map={"ClusterName": cluster.cluster_name, "ServiceName": service.service_name},
        period=Duration.minutes(1),
        statistic="Maximum",  # any task desired during the minute: not at zero
    )
    scaling.scale_on_metric(
        "StartFromZero",
        metric=cloudwatch.MathExpression(
            expression=FROM_ZERO_EXPRESSION,
            # Maximum: a job that arrives in the minute's last second counts.
            using_metrics={"waiting": _visible(queue, "Maximum"), "desired": desired},
            period=Duration.minutes(1),
            label="jobs waiting for a pool at zero",
        ),
        scaling_steps=[
            appscaling.ScalingInterval(upper=1, change=0),
            appscaling.ScalingInterval(lower=1, change=pool.from_zero_tasks),
        ],
        adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
        # Until the desired count's datapoint shows the task (a minute, plus CloudWatch's
        # lag), the alarm still sees zero: it must not add another.
        cooldown=Duration.seconds(pool.from_zero_cooldown_seconds),
        evaluation_periods=1,
    )


# jobs waiting per running task (none running: per one task) plus jobs running per task
# (the workers' busy slots, averaged over their per-minute samples).
LOAD_EXPRESSION = "waiting / IF(FILL(running, 0) > 0, FILL(running, 0), 1) + FILL(busy, 0)"


def _scale_in_when_idle(
    cluster: ecs.ICluster,
    pool: PoolConfig,
    queue: PoolQueue,
    service: ecs.FargateService,
    scaling: ecs.ScalableTaskCount,
    namespace: str,
) -> None:
    """Halve (``idle_scale_in_percent``) an idle pool each minute: target tracking
    alone waits 15 quiet minutes, every task billed (bench/scale_sim.py). Idle: jobs waiting
    and running per task below half a task's slots; running jobs are the workers' busy slots
    (their messages are gone once claimed)."""
    assert pool.idle_scale_in_percent is not None
    minute = Duration.minutes(1)
    busy = cloudwatch.Metric(
        namespace=namespace,
        metric_name=m.SLOTS_BUSY,
        dimensions_map={m.DIM_SERVICE: m.WORKER_SERVICE, m.DIM_POOL: queue.pool},
        period=minute,
        statistic="Average",  # busy slots per task
    )
    load = cloudwatch.MathExpression(
        expression=LOAD_EXPRESSION,
        using_metrics={
            "waiting": _visible(queue, "Average"),
            "running": running_tasks(cluster, service),
            "busy": busy,
        },
        label="Jobs waiting and running per task",
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
