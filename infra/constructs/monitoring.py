"""Monitoring: the dashboard ops watch and the alarms that page them.

Queue figures come from SQS, worker figures from the worker's EMF metrics
(``pagefleet.specs.metrics_names``), task counts from Container Insights, API figures from
API Gateway.
The queues' age alarms live with the queues and the operational alarms (functions, tasks,
tables, sweeper, dead letters) in ``alarms``; this adds failure rate per pool and API 5xx,
and shows every alarm's state. Every alarm notifies the alerts topic.
"""

from __future__ import annotations

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from infra.config import StageConfig
from pagefleet.specs import metrics_names as m

from .alerts import Alerts
from .api import Api
from .browser_workers import BrowserWorkers
from .job_queues import JobQueues
from .lambda_factory import LambdaFactory

PERIOD = Duration.minutes(1)
WIDTH = 8  # three widgets per row (dashboard width is 24)


def worker_metric(
    name: str,
    pool: str,
    statistic: str,
    *,
    namespace: str,
    period: Duration = PERIOD,
    extra: dict[str, str] | None = None,
) -> cw.Metric:
    """A worker EMF metric of the stage's namespace, with exactly the dimension set the
    worker emits."""
    return cw.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map={m.DIM_SERVICE: m.WORKER_SERVICE, m.DIM_POOL: pool, **(extra or {})},
        statistic=statistic,
        period=period,
        label=" ".join([pool, *(extra or {}).values(), statistic]),
    )


def _finished_by_status(pool: str, period: Duration, namespace: str) -> dict[str, cw.IMetric]:
    return {
        f"{pool}_{status}": worker_metric(
            m.JOBS_FINISHED,
            pool,
            "Sum",
            namespace=namespace,
            period=period,
            extra={m.DIM_STATUS: status},
        )
        for status in m.FINAL_STATES
    }


def _sum(ids: list[str]) -> str:
    return " + ".join(f"FILL({i}, 0)" for i in ids)


def failure_rate(
    pool: str, *, namespace: str, period: Duration, min_jobs: int = 5
) -> cw.MathExpression:
    """Percent of finished jobs that failed, timed out or were dead-lettered."""
    metrics = _finished_by_status(pool, period, namespace)
    total = _sum(list(metrics))
    failed = _sum([f"{pool}_{s}" for s in m.FAILED_STATES])
    return cw.MathExpression(
        expression=f"IF(({total}) >= {min_jobs}, 100 * ({failed}) / ({total}), 0)",
        using_metrics=metrics,
        label=f"{pool} failure rate %",
        period=period,
    )


def _per_finished(name: str, pool: str, label: str, namespace: str) -> cw.MathExpression:
    metrics = _finished_by_status(pool, PERIOD, namespace)
    total = _sum(list(metrics))
    count_id = f"{pool}_{name.lower()}"
    return cw.MathExpression(
        expression=f"IF(({total}) > 0, 100 * FILL({count_id}, 0) / ({total}), 0)",
        using_metrics={**metrics, count_id: worker_metric(name, pool, "Sum", namespace=namespace)},
        label=label,
        period=PERIOD,
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        alerts: Alerts,
        queues: JobQueues,
        workers: BrowserWorkers,
        api: Api,
        functions: LambdaFactory,
    ) -> None:
        super().__init__(scope, construct_id)
        pools = list(queues.pools)
        ns = m.stage_namespace(config.stage)
        self.alarms: list[cw.Alarm] = []

        for pool in pools:
            self.alarms.append(
                alerts.notify(
                    cw.Alarm(
                        self,
                        f"{pool.capitalize()}FailureRateAlarm",
                        alarm_description=(
                            f"More than {config.failure_rate_alarm_percent}% of pool {pool}'s "
                            "finished jobs failed, timed out or were dead-lettered"
                        ),
                        metric=failure_rate(pool, namespace=ns, period=Duration.minutes(5)),
                        threshold=config.failure_rate_alarm_percent,
                        comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                        evaluation_periods=3,
                        datapoints_to_alarm=2,
                        treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                    ),
                    runbook="job-failure-rate",
                )
            )
        rest_api = api.rest_api
        self.alarms.append(
            alerts.notify(
                cw.Alarm(
                    self,
                    "Api5xxAlarm",
                    alarm_description="The API returned server errors",
                    metric=rest_api.metric_server_error(period=PERIOD, statistic="Sum"),
                    threshold=config.api_5xx_alarm_count,
                    comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                    evaluation_periods=5,
                    datapoints_to_alarm=3,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                ),
                runbook="api-5xx",
            )
        )

        self.dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"pagefleet-{config.stage}",
            default_interval=Duration.hours(3),
        )
        d = self.dashboard
        d.add_widgets(
            cw.TextWidget(
                markdown=f"# pagefleet {config.stage}\nQueues, jobs, workers and API. "
                "Worker figures are the worker's EMF metrics (namespace `pagefleet/<stage>`).",
                width=24,
                height=2,
            )
        )
        # Queues
        d.add_widgets(
            cw.GraphWidget(
                title="Jobs waiting (visible) / being claimed (in flight)",
                width=WIDTH,
                left=[
                    metric
                    for q in queues.all
                    for metric in (
                        q.queue.metric_approximate_number_of_messages_visible(
                            period=PERIOD, statistic="Maximum", label=f"{q.key} visible"
                        ),
                        q.queue.metric_approximate_number_of_messages_not_visible(
                            period=PERIOD, statistic="Maximum", label=f"{q.key} being claimed"
                        ),
                    )
                ],
            ),
            cw.GraphWidget(
                title="Oldest waiting job age (s)",
                width=WIDTH,
                left=[
                    q.queue.metric_approximate_age_of_oldest_message(
                        period=PERIOD, statistic="Maximum", label=q.key
                    )
                    for q in queues.all
                ],
                left_annotations=[
                    cw.HorizontalAnnotation(
                        value=config.oldest_age_alarm_seconds, label="alarm", color="#d62728"
                    )
                ],
            ),
            cw.GraphWidget(
                title="Dead letters",
                width=WIDTH,
                left=[
                    q.dlq.metric_approximate_number_of_messages_visible(
                        period=PERIOD, statistic="Maximum", label=f"{q.key} DLQ"
                    )
                    for q in queues.all
                ],
            ),
        )
        # Jobs
        d.add_widgets(
            cw.GraphWidget(
                title="Jobs by final state",
                width=WIDTH,
                stacked=True,
                left=[
                    worker_metric(
                        m.JOBS_FINISHED, pool, "Sum", namespace=ns, extra={m.DIM_STATUS: status}
                    )
                    for pool in pools
                    for status in m.FINAL_STATES
                ],
            ),
            cw.GraphWidget(
                title="Failure, retry and timeout rates (% of finished)",
                width=WIDTH,
                left=[
                    metric
                    for pool in pools
                    for metric in (
                        failure_rate(pool, namespace=ns, period=PERIOD, min_jobs=1),
                        _per_finished(m.RETRIES, pool, f"{pool} retries %", ns),
                        _per_finished(m.TIMEOUTS, pool, f"{pool} timeouts %", ns),
                    )
                ],
            ),
            cw.GraphWidget(
                title="Browser crashes",
                width=WIDTH,
                left=[
                    worker_metric(m.BROWSER_CRASHES, pool, "Sum", namespace=ns) for pool in pools
                ],
            ),
        )
        # Latency
        percentiles = ("p50", "p95", "p99")
        d.add_widgets(
            cw.GraphWidget(
                title="Job duration (ms)",
                width=12,
                left=[
                    worker_metric(m.JOB_DURATION, p, s, namespace=ns)
                    for p in pools
                    for s in percentiles
                ],
            ),
            cw.GraphWidget(
                title="Queue delay (ms)",
                width=12,
                left=[
                    worker_metric(m.QUEUE_DELAY, p, s, namespace=ns)
                    for p in pools
                    for s in percentiles
                ],
            ),
        )
        # Workers
        d.add_widgets(
            cw.GraphWidget(
                title="Running worker tasks",
                width=WIDTH,
                left=[
                    workers.running_tasks(w.service).with_(label=name)
                    for name, w in workers.pools.items()
                ],
            ),
            cw.GraphWidget(
                title="Saturation (% of browser slots busy)",
                width=WIDTH,
                left=[
                    # SlotsBusy is a per-task gauge (sampled each minute and at each change):
                    # its Average is the busy slots of a task.
                    cw.MathExpression(
                        expression=f"100 * FILL({name}_busy, 0) / {w.config.concurrency}",
                        using_metrics={
                            f"{name}_busy": worker_metric(
                                m.SLOTS_BUSY, name, "Average", namespace=ns
                            ),
                        },
                        label=name,
                        period=PERIOD,
                    )
                    for name, w in workers.pools.items()
                ],
                left_y_axis=cw.YAxisProps(min=0, max=100),
            ),
            cw.GraphWidget(
                title="Worker CPU / memory utilization (%)",
                width=WIDTH,
                left=[
                    metric
                    for name, w in workers.pools.items()
                    for metric in (
                        w.service.metric_cpu_utilization(period=PERIOD, label=f"{name} CPU"),
                        w.service.metric_memory_utilization(period=PERIOD, label=f"{name} mem"),
                    )
                ],
            ),
        )
        # API
        d.add_widgets(
            cw.GraphWidget(
                title="API requests and errors",
                width=WIDTH,
                left=[rest_api.metric_count(period=PERIOD, statistic="Sum", label="requests")],
                right=[
                    rest_api.metric_client_error(period=PERIOD, statistic="Sum", label="4xx"),
                    rest_api.metric_server_error(period=PERIOD, statistic="Sum", label="5xx"),
                ],
            ),
            cw.GraphWidget(
                title="API latency (ms)",
                width=WIDTH,
                left=[
                    rest_api.metric_latency(period=PERIOD, statistic=s, label=f"latency {s}")
                    for s in percentiles
                ],
            ),
            cw.GraphWidget(
                title="Lambda errors and throttles",
                width=WIDTH,
                left=[
                    fn.metric_errors(period=PERIOD, statistic="Sum", label=f"{name} errors")
                    for name, fn in functions.functions.items()
                ],
                right=[
                    fn.metric_throttles(period=PERIOD, statistic="Sum", label=f"{name} throttles")
                    for name, fn in functions.functions.items()
                ],
            ),
        )
        d.add_widgets(
            cw.AlarmStatusWidget(title="Alarms", width=24, height=8, alarms=list(alerts.alarms))
        )
        self.dashboard_url = (
            f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}"
            f"#dashboards:name=pagefleet-{config.stage}"
        )
