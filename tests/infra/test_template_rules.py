"""Rules of a template AWS deploys and runs as intended, over every resource of a kind in every
stage: what AWS does that the embedded AWS does not (creation order, stream retries, log
routing, request validation). A resource added later is held to the same rule.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pagefleet.specs.resources import JOBS_STREAM_FILTERS

from .helpers import as_list

pytestmark = [pytest.mark.infra, pytest.mark.slow]


def references(value: Any) -> Iterator[str]:
    """The logical ids an intrinsic function in ``value`` refers to."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str) and not inner.startswith("AWS::"):
                yield inner
            elif key == "Fn::GetAtt":
                yield inner[0] if isinstance(inner, list) else str(inner).split(".")[0]
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                for part in str(text).split("${")[1:]:
                    name = part.split("}")[0].split(".")[0]
                    if not name.startswith("AWS::"):
                        yield name
                yield from references(inner)
            else:
                yield from references(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from references(inner)


def created_before(raw: dict[str, Any], logical_id: str) -> set[str]:
    """Everything CloudFormation finishes before creating ``logical_id``: what it names in
    DependsOn or refers to, and so on down."""
    resources = raw["Resources"]
    seen: set[str] = set()
    todo = [logical_id]
    while todo:
        resource = resources[todo.pop()]
        direct = set(as_list(resource.get("DependsOn", [])))
        direct |= set(references(resource.get("Properties", {})))
        for found in direct - seen:
            if found in resources:
                seen.add(found)
                todo.append(found)
    return seen


def of_type(raw: dict[str, Any], cfn_type: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in raw["Resources"].items() if v["Type"] == cfn_type}


def _logs(stage: dict[str, Any]) -> bool:
    props = stage.get("Properties", {})
    if props.get("AccessLogSetting") or props.get("AccessLogSettings"):
        return True
    settings = [*props.get("MethodSettings", []), props.get("DefaultRouteSettings") or {}]
    settings += list((props.get("RouteSettings") or {}).values())
    return any(s.get("LoggingLevel", "OFF") != "OFF" or s.get("DataTraceEnabled") for s in settings)


def test_every_api_stage_that_logs_is_created_after_the_accounts_logging_role(
    stage_synth,
) -> None:
    """API Gateway refuses a REST or WebSocket stage with logging until the account's
    CloudWatch Logs role is set ("CloudWatch Logs role ARN must be set in account settings")."""
    raw = stage_synth.raw
    websocket = {
        k
        for k, v in of_type(raw, "AWS::ApiGatewayV2::Api").items()
        if v["Properties"].get("ProtocolType") == "WEBSOCKET"
    }
    stages = {
        **of_type(raw, "AWS::ApiGateway::Stage"),
        **{
            k: v
            for k, v in of_type(raw, "AWS::ApiGatewayV2::Stage").items()
            if set(references(v["Properties"]["ApiId"])) & websocket
        },
    }
    logging = [k for k, v in stages.items() if _logs(v)]
    assert len(logging) >= 2, "the REST and the WebSocket stage both log"
    accounts = of_type(raw, "AWS::ApiGateway::Account")
    if stage_synth.stack.config.api_gateway_account == "existing":
        assert accounts == {}  # someone else's setting: left alone
        return
    (account,) = accounts
    late = [stage for stage in logging if account not in created_before(raw, stage)]
    assert late == [], f"created before {account}: {late}"


def test_every_ecs_service_waits_for_its_capacity_providers_routes_and_endpoints(
    stage_synth,
) -> None:
    """A service starts tasks as it is created: its capacity providers must be associated,
    its subnets routed (NAT or internet gateway) and the VPC endpoints its tasks pull
    images and write logs through in place, or the first deploy fails."""
    raw = stage_synth.raw
    associations = of_type(raw, "AWS::ECS::ClusterCapacityProviderAssociations")
    route_of = {
        v["Properties"]["RouteTableId"]["Ref"]: k
        for k, v in of_type(raw, "AWS::EC2::Route").items()
        if v["Properties"].get("DestinationCidrBlock") == "0.0.0.0/0"
    }
    table_of = {
        v["Properties"]["SubnetId"]["Ref"]: v["Properties"]["RouteTableId"]["Ref"]
        for v in of_type(raw, "AWS::EC2::SubnetRouteTableAssociation").values()
    }
    subnets = of_type(raw, "AWS::EC2::Subnet")
    endpoints = of_type(raw, "AWS::EC2::VPCEndpoint")
    services = of_type(raw, "AWS::ECS::Service")
    assert services
    for name, service in services.items():
        props = service["Properties"]
        before = created_before(raw, name)
        providers = {s["CapacityProvider"] for s in props["CapacityProviderStrategy"]}
        mine = [
            k
            for k, v in associations.items()
            if v["Properties"]["Cluster"] == props["Cluster"]
            and providers <= set(v["Properties"]["CapacityProviders"])
        ]
        assert mine and set(mine) <= before, f"{name}: capacity providers {providers}"
        placed = [s["Ref"] for s in props["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]]
        routes = {route_of[table_of[subnet]] for subnet in placed}
        assert routes <= before, f"{name}: default routes {sorted(routes - before)}"
        vpcs = {json.dumps(subnets[s]["Properties"]["VpcId"]) for s in placed}
        theirs = {k for k, v in endpoints.items() if json.dumps(v["Properties"]["VpcId"]) in vpcs}
        assert theirs <= before, f"{name}: endpoints {sorted(theirs - before)}"
    if stage_synth.stack.config.egress == "nat":
        wanted = ("ecr.api", "ecr.dkr", "logs", "s3")
        named = [json.dumps(v["Properties"]["ServiceName"]) for v in endpoints.values()]
        assert all(any(w in n for n in named) for w in wanted), named


def test_every_stream_event_source_is_filtered_bisected_and_has_a_failure_destination(
    stage_synth,
) -> None:
    """One bad record must not hold or drop the rest of a stream's batch: its reader names
    the record that failed, the mapping bisects what makes no progress, sends what still
    fails to a destination, and only records the reader takes invoke it."""
    raw = stage_synth.raw
    streams = [
        (k, v["Properties"])
        for k, v in of_type(raw, "AWS::Lambda::EventSourceMapping").items()
        if v["Properties"]["EventSourceArn"].get("Fn::GetAtt", [None, None])[1] == "StreamArn"
    ]
    assert streams
    for name, props in streams:
        assert props.get("BisectBatchOnFunctionError") is True, name
        assert "ReportBatchItemFailures" in props.get("FunctionResponseTypes", []), name
        assert props["DestinationConfig"]["OnFailure"]["Destination"], name
        assert props["FilterCriteria"]["Filters"], name
    jobs = stage_synth.stack.store.jobs
    jobs_id = stage_synth.stack.resolve(stage_synth.stack.get_logical_id(jobs.node.default_child))
    ((_, mapping),) = [
        (k, p) for k, p in streams if p["EventSourceArn"]["Fn::GetAtt"][0] == jobs_id
    ]
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert patterns == list(JOBS_STREAM_FILTERS)


def test_the_local_stream_poller_plays_the_jobs_streams_mapping(synth) -> None:
    """The local stack's poller filters, batches and retries as the deployed mapping does."""
    from devstack import event_sources

    ((props),) = [
        v["Properties"]
        for v in of_type(synth.raw, "AWS::Lambda::EventSourceMapping").values()
        if "FilterCriteria" in v["Properties"]
    ]
    mapping = event_sources.StreamMapping(lambda event: None, "arn")
    assert mapping.max_retries == props["MaximumRetryAttempts"]
    assert event_sources.STREAM_BATCH_SIZE == props["BatchSize"]
    assert event_sources.STREAM_BATCHING_WINDOW_S <= props["MaximumBatchingWindowInSeconds"]

    def record(name: str, sk: str) -> dict[str, Any]:
        return {"eventName": name, "dynamodb": {"Keys": {"sk": {"S": sk}}}}

    taken = {
        (n, sk)
        for n in ("INSERT", "MODIFY", "REMOVE")
        for sk in ("JOB#1", "EVT#1#000001", "EVTSEQ#1", "IDEM#k", "DLV#1", "BREAKER#h", "SCHED#s")
        if mapping.matches(record(n, sk))
    }
    assert taken == {("INSERT", "JOB#1"), ("MODIFY", "JOB#1"), ("REMOVE", "JOB#1")} | {
        ("INSERT", "EVT#1#000001")
    }


def test_a_fire_the_scheduler_function_fails_is_tried_again_and_kept(synth) -> None:
    """The Scheduler invokes the function asynchronously: its own retries and DLQ cover
    handing the fire over only. The function's asynchronous invocation tries a failed fire
    again and sends it to the alarmed DLQ; the local Scheduler plays it so."""
    from devstack import scheduler as local_scheduler
    from pagefleet.specs.resources import SCHEDULER

    from .helpers import logical_id

    schedules = synth.stack.schedules
    function, dlq = logical_id(schedules.function), logical_id(schedules.dlq)
    ((props),) = [
        v["Properties"]
        for v in of_type(synth.raw, "AWS::Lambda::EventInvokeConfig").values()
        if v["Properties"]["FunctionName"] == {"Ref": function}
    ]
    assert props["MaximumRetryAttempts"] == SCHEDULER.function_retries > 0
    destination = props["DestinationConfig"]["OnFailure"]["Destination"]
    assert destination == {"Fn::GetAtt": [dlq, "Arn"]}
    assert local_scheduler.ATTEMPTS == 1 + props["MaximumRetryAttempts"]
    # Lambda sends it with the function's role: which may send there.
    role = synth.raw["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0]
    sends = [
        statement
        for policy in of_type(synth.raw, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "sqs:SendMessage" in as_list(statement["Action"])
    ]
    assert {"Fn::GetAtt": [dlq, "Arn"]} in [s["Resource"] for s in sends]


def emf_line(capsys: pytest.CaptureFixture[str]) -> str:
    """A line of EMF as the worker prints it to stdout."""
    from browser_task.observe.telemetry import WorkerMetrics

    capsys.readouterr()
    metrics = WorkerMetrics("standard")
    metrics.count("Retries")
    metrics.flush()
    (line,) = [x for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]
    return line


def test_every_firelens_emf_output_ships_the_line_the_container_printed(
    stage_synth, capsys
) -> None:
    """FireLens hands Fluent Bit ``{"log": "<line>", "source": "stdout", ...}``; CloudWatch
    extracts metrics only from an event that is the EMF document itself."""
    line = emf_line(capsys)
    outputs = [
        c["LogConfiguration"]["Options"]
        for task in of_type(stage_synth.raw, "AWS::ECS::TaskDefinition").values()
        for c in task["Properties"]["ContainerDefinitions"]
        if c.get("LogConfiguration", {}).get("LogDriver") == "awsfirelens"
        and c["LogConfiguration"]["Options"].get("log_format") == "json/emf"
    ]
    assert outputs
    for options in outputs:
        assert options["Name"] == "cloudwatch_logs"
        record = {"log": line, "source": "stdout", "container_id": "abc", "ecs_cluster": "c"}
        # The cloudwatch_logs output sends the value of log_key, or else the whole record.
        sent = record[options["log_key"]] if "log_key" in options else json.dumps(record)
        document = json.loads(sent)
        (directive,) = document["_aws"]["CloudWatchMetrics"]
        assert {"Name": "Retries", "Unit": "Count"} in directive["Metrics"], options
        assert document["Retries"] in (1.0, [1.0])


def test_no_request_validator_without_something_to_validate(stage_synth) -> None:
    """A validator on methods with no request models or declared parameters checks nothing."""
    raw = stage_synth.raw
    validators = of_type(raw, "AWS::ApiGateway::RequestValidator")
    methods = of_type(raw, "AWS::ApiGateway::Method")
    assert methods
    for name, validator in validators.items():
        users = [
            m["Properties"]
            for m in methods.values()
            if name in set(references(m["Properties"].get("RequestValidatorId", {})))
        ]
        if validator["Properties"].get("ValidateRequestBody"):
            assert any(u.get("RequestModels") for u in users), f"{name}: no model to check"
        if validator["Properties"].get("ValidateRequestParameters"):
            assert any(u.get("RequestParameters") for u in users), f"{name}: no parameters"


# What a running job's message would count in SQS, had it been kept in flight until the job
# ended (before issue 21 item 4).
IN_FLIGHT = "ApproximateNumberOfMessagesNotVisible"


def _alarm_metrics(alarm: dict[str, Any]) -> set[str]:
    names = {alarm["MetricName"]} if "MetricName" in alarm else set()
    for query in alarm.get("Metrics", []):
        if "MetricStat" in query:
            names.add(query["MetricStat"]["Metric"]["MetricName"])
    return names


def _sqs_grants(raw: dict[str, Any]) -> dict[str, dict[str, set[str]]]:
    """Per IAM policy: the SQS actions it allows on each queue (by logical id)."""
    out: dict[str, dict[str, set[str]]] = {}
    for name, policy in of_type(raw, "AWS::IAM::Policy").items():
        allowed: dict[str, set[str]] = {}
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement.get("Effect") != "Allow":
                continue
            queues = set(references(statement.get("Resource", [])))
            for action in as_list(statement.get("Action", [])):
                if action.startswith("sqs:"):
                    allowed.setdefault(action, set()).update(queues)
        out[name] = allowed
    return out


def test_the_scaling_signal_ignores_in_flight_messages(stage_synth) -> None:
    """A claimed job's message is deleted once its claim is written and its lease holds the
    job, so a job queue's visible count and oldest age are of jobs that wait (a 20-minute
    job is no 20-minute-old backlog). No scaling policy, no alarm that drives one and no
    oldest-age alarm reads the in-flight count, and every role that receives a job queue's
    messages may delete them (the claim's delete) and send to that queue (a retry, a
    take-back): without the delete, the message of every running job would come back."""
    raw = stage_synth.raw
    policies = of_type(raw, "AWS::ApplicationAutoScaling::ScalingPolicy")
    alarms = of_type(raw, "AWS::CloudWatch::Alarm").values()
    scaling_alarms = [
        a["Properties"]
        for a in alarms
        if set(references(a["Properties"].get("AlarmActions", []))) & set(policies)
    ]
    age_alarms = [
        a["Properties"]
        for a in alarms
        if "ApproximateAgeOfOldestMessage" in _alarm_metrics(a["Properties"])
    ]
    # Every pool scales on its oldest waiting job: the rule is about real signals.
    pools = stage_synth.stack.config.pools
    on_age = [a for a in scaling_alarms if "ApproximateAgeOfOldestMessage" in _alarm_metrics(a)]
    assert len(on_age) == len(pools)
    for name, policy in policies.items():
        assert IN_FLIGHT not in json.dumps(policy), name
    for alarm in [*scaling_alarms, *age_alarms]:
        assert IN_FLIGHT not in _alarm_metrics(alarm), alarm.get("AlarmDescription")
    # The job queues: those whose age is watched.
    job_queues = set(references(age_alarms)) & set(of_type(raw, "AWS::SQS::Queue"))
    assert len(job_queues) == 3 * len(pools)  # high, normal and low
    receivers = 0
    for name, allowed in _sqs_grants(raw).items():
        received = allowed.get("sqs:ReceiveMessage", set()) & job_queues
        receivers += bool(received)
        assert received <= allowed.get("sqs:DeleteMessage", set()), name
        assert received <= allowed.get("sqs:SendMessage", set()), name
    assert receivers >= len(pools)  # each pool's workers


def test_no_service_puts_a_graviton_task_on_fargate_spot(stage_synth) -> None:
    """AWS: "Linux tasks with the ARM64 architecture don't support the Fargate Spot capacity
    provider": such a service deploys and never places a task."""
    raw = stage_synth.raw
    task_definitions = of_type(raw, "AWS::ECS::TaskDefinition")
    for name, service in of_type(raw, "AWS::ECS::Service").items():
        props = service["Properties"]
        providers = {s["CapacityProvider"] for s in props.get("CapacityProviderStrategy", [])}
        task = task_definitions[props["TaskDefinition"]["Ref"]]["Properties"]
        arch = task.get("RuntimePlatform", {}).get("CpuArchitecture", "X86_64")
        assert "FARGATE_SPOT" not in providers or arch == "X86_64", f"{name}: {arch} on Spot"


# Resources whose name is one per account and region, or is how CloudWatch names their
# metrics (a REST API's ApiName): two stages in one account must not share one.
ACCOUNT_NAMES = {
    "AWS::ApiGateway::RestApi": "Name",
    "AWS::ApiGatewayV2::Api": "Name",
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::Events::Rule": "Name",
    "AWS::IAM::Role": "RoleName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SecretsManager::Secret": "Name",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SSM::Parameter": "Name",
    "AWS::ApplicationAutoScaling::ScalingPolicy": "PolicyName",
}


def _metrics_of(props: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The metrics an alarm or a target-tracking policy reads."""
    if "MetricName" in props:
        yield props
    for query in props.get("Metrics", []):
        if "MetricStat" in query:
            yield query["MetricStat"]["Metric"]
    tracking = props.get("TargetTrackingScalingPolicyConfiguration", {})
    # Only a policy's own spec recurses (an empty one would recurse forever).
    if "CustomizedMetricSpecification" in tracking:
        yield from _metrics_of(tracking["CustomizedMetricSpecification"])


def account_wide(raw: dict[str, Any]) -> set[str]:
    """What of a stage's template another stack in the same account would see as its own:
    literal account-wide names, and metrics its alarms and scaling read whose namespace and
    dimensions are all literal (a dimension that refers to a resource is the stack's)."""
    out: set[str] = set()
    for resource in raw["Resources"].values():
        props = resource.get("Properties", {})
        name = props.get(ACCOUNT_NAMES.get(resource["Type"], ""))
        if isinstance(name, str):
            out.add(f"{resource['Type']} {name}")
        if resource["Type"] in (
            "AWS::CloudWatch::Alarm",
            "AWS::ApplicationAutoScaling::ScalingPolicy",
        ):
            for metric in _metrics_of(props):
                dims = metric.get("Dimensions", [])
                if all(isinstance(d["Value"], str) for d in dims):
                    out.add(
                        json.dumps(
                            [metric["Namespace"], metric["MetricName"], dims], sort_keys=True
                        )
                    )
    return out


def test_two_stages_in_one_account_share_no_metric_name_or_alarm(synths) -> None:
    """CloudWatch matches a metric on its namespace and full dimension set, and API Gateway's
    metrics name a REST API by its name: a stage that emits or reads what another stage does
    would scale on, or page for, the other's load."""
    dev, prod = synths.get("dev").raw, synths.get("prod").raw
    assert account_wide(dev) and account_wide(prod)
    assert sorted(account_wide(dev) & account_wide(prod)) == []


def test_every_sqs_mapping_has_its_own_maximum_concurrency(stage_synth) -> None:
    """Lambda: "Event source mappings don't account for reserved concurrency": a function
    fed by SQS mappings is paced by each mapping's ScalingConfig.MaximumConcurrency (2 to
    1,000), never by a reserved concurrency the mappings' pollers would throttle against."""
    raw = stage_synth.raw
    functions = of_type(raw, "AWS::Lambda::Function")
    aliases = of_type(raw, "AWS::Lambda::Alias")

    def function_of(target: Any) -> str:
        name = next(iter(references(target)))
        if name in aliases:
            return next(iter(references(aliases[name]["Properties"]["FunctionName"])))
        return name

    queues = of_type(raw, "AWS::SQS::Queue")
    mappings = [
        v["Properties"]
        for v in of_type(raw, "AWS::Lambda::EventSourceMapping").values()
        if set(references(v["Properties"]["EventSourceArn"])) & set(queues)
    ]
    assert mappings
    for props in mappings:
        target = function_of(props["FunctionName"])
        assert 2 <= props.get("ScalingConfig", {}).get("MaximumConcurrency", 0) <= 1000, target
        reserved = functions[target]["Properties"].get("ReservedConcurrentExecutions")
        assert reserved is None, f"{target}: reserved {reserved} beside SQS mappings"


def test_a_lease_over_for_twice_a_lease_pages_with_a_runbook(stage_synth) -> None:
    """With the message deleted at claim, a take-back that keeps failing shows nowhere but
    in the sweeper's OldestExpiredLeaseAge: its alarm fires above twice the job queues'
    visibility timeout (the lease) and links the expired-lease runbook."""
    from pagefleet.specs import metrics_names as m
    from pagefleet.specs.resources import LEASE_SECONDS

    raw = stage_synth.raw
    alarms = [
        a["Properties"]
        for a in of_type(raw, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == m.OLDEST_EXPIRED_LEASE
    ]
    assert len(alarms) == 1, alarms
    (alarm,) = alarms
    assert alarm["Namespace"] == m.stage_namespace(stage_synth.stage)
    assert alarm["Dimensions"] == [{"Name": "service", "Value": m.SWEEPER_SERVICE}]
    lease = LEASE_SECONDS
    assert alarm["Threshold"] == 2 * lease
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert "expired-lease" in json.dumps(alarm.get("AlarmDescription", ""))


def _name_of(value: Any) -> str:
    """A log group's name with each reference written ``{Ref:<logical id>}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_name_of(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"{{Ref:{value['Ref']}}}"
    return json.dumps(value, sort_keys=True)


def test_every_execution_logging_stage_has_its_log_group_in_the_stack(stage_synth) -> None:
    """API Gateway "automatically creates and manages a CloudWatch Logs log group ... named
    API-Gateway-Execution-Logs_{rest-api-id}/{stage_name}": made by the service, it never
    expires and outlives `cdk destroy`. The stack makes it first, with retention, and the
    stage waits for it (else API Gateway may create it, and the stack's create fails). The
    WebSocket stage's execution logs go to /aws/apigateway/{api-id}/{stage}."""
    raw = stage_synth.raw
    groups = {
        _name_of(v["Properties"].get("LogGroupName")): k
        for k, v in of_type(raw, "AWS::Logs::LogGroup").items()
    }
    expected: list[tuple[str, str]] = []
    for stage_id, stage in of_type(raw, "AWS::ApiGateway::Stage").items():
        props = stage["Properties"]
        levels = {m.get("LoggingLevel", "OFF") for m in props.get("MethodSettings", [])}
        if levels - {"OFF"}:
            api = props["RestApiId"]["Ref"]
            name = f"API-Gateway-Execution-Logs_{{Ref:{api}}}/{props['StageName']}"
            expected.append((stage_id, name))
    for stage_id, stage in of_type(raw, "AWS::ApiGatewayV2::Stage").items():
        props = stage["Properties"]
        if props.get("DefaultRouteSettings", {}).get("LoggingLevel", "OFF") != "OFF":
            api = props["ApiId"]["Ref"]
            expected.append((stage_id, f"/aws/apigateway/{{Ref:{api}}}/{props['StageName']}"))
    assert len(expected) == 2, expected  # the REST API's and the WebSocket API's
    for stage_id, name in expected:
        assert name in groups, f"{stage_id}: no log group {name} in the stack"
        group = raw["Resources"][groups[name]]
        assert group["Properties"].get("RetentionInDays"), f"{name} never expires"
        assert groups[name] in created_before(raw, stage_id), f"{stage_id} may log first"


def test_a_stage_that_keeps_no_data_leaves_no_log_group_or_key_behind(stage_synth) -> None:
    """CDK retains log groups and KMS keys when their stack is deleted: a dev stage made and
    destroyed often left every log group and a billed key behind. Prod-like stages keep
    their key and logs on purpose."""
    raw = stage_synth.raw
    resources = {**of_type(raw, "AWS::Logs::LogGroup"), **of_type(raw, "AWS::KMS::Key")}
    assert any(r["Type"] == "AWS::KMS::Key" for r in resources.values())
    policies = {k: r.get("DeletionPolicy", "Delete") for k, r in resources.items()}
    if stage_synth.stack.config.retain_data:
        keys = [k for k, r in resources.items() if r["Type"] == "AWS::KMS::Key"]
        assert all(policies[k] == "Retain" for k in keys), policies
        return
    kept = {k: p for k, p in policies.items() if p != "Delete"}
    assert kept == {}, f"{stage_synth.stage} keeps these after `cdk destroy`"


def test_the_worker_image_is_scanned_on_push_where_it_is_pushed(stage_synth) -> None:
    """The worker image goes to the CDK bootstrap's repository (the assets manifest names it),
    which the stack does not own: the registry's scanning configuration must scan that
    repository on push, since the bootstrap template creates it without scanning."""
    from fnmatch import fnmatchcase

    manifests = list(stage_synth.outdir.glob("*.assets.json"))
    repositories = {
        destination["repositoryName"]
        .replace("${AWS::AccountId}", "123456789012")
        .replace("${AWS::Region}", "us-east-1")
        for manifest in manifests
        for image in json.loads(manifest.read_text()).get("dockerImages", {}).values()
        for destination in image["destinations"].values()
    }
    assert repositories, "the worker image is an asset"
    (config,) = of_type(stage_synth.raw, "AWS::ECR::RegistryScanningConfiguration").values()
    props = config["Properties"]
    assert props["ScanType"] in ("BASIC", "ENHANCED")
    on_push = [
        f["Filter"]
        for rule in props["Rules"]
        if rule["ScanFrequency"] in ("SCAN_ON_PUSH", "CONTINUOUS_SCAN")
        for f in rule["RepositoryFilters"]
        if f["FilterType"] == "WILDCARD"
    ]
    for repository in repositories:
        assert any(fnmatchcase(repository, f) for f in on_push), (repository, on_push)


# Resources CloudFormation must never replace: a new logical id (a construct renamed or
# moved), a new explicit name or a new key schema makes CloudFormation create a new resource
# and delete (or, retained, orphan) the old one: every job, tenant, key, usage record, queued
# message and artifact would be left behind. docs/deploy.md, "Resources that must never be
# replaced". Changing this list is a data migration: see that section first.
NEVER_REPLACED: dict[str, dict[str, Any]] = {
    # DynamoDB tables: logical id -> (key schema, each index's key schema).
    "AWS::DynamoDB::Table": {
        "JobStoreJobsTable83DB547D": (
            [("pk", "HASH"), ("sk", "RANGE")],
            {
                "by_status": [("status_pk", "HASH"), ("sk", "RANGE")],
                "unqueued": [("unqueued_pk", "HASH"), ("created_at", "RANGE")],
                "ops": [("ops_pk", "HASH"), ("ops_sk", "RANGE")],
            },
        ),
        "JobStoreTenantsTableEF11B6BD": (
            [("pk", "HASH"), ("sk", "RANGE")],
            {"by_tenant": [("tenant_id", "HASH"), ("sk", "RANGE")]},
        ),
        "JobStoreUsageTableEB0960E6": (
            [("pk", "HASH"), ("sk", "RANGE")],
            {"by_day": [("day_pk", "HASH"), ("day_sk", "RANGE")]},
        ),
        "LiveConnectionsTable8D198457": (
            [("pk", "HASH"), ("sk", "RANGE")],
            {"idle": [("idle_pk", "HASH"), ("idle_since", "RANGE")]},
        ),
    },
    # Queues: a replaced queue drops the jobs waiting in it, a replaced DLQ its dead letters.
    "AWS::SQS::Queue": dict.fromkeys(
        (
            "JobQueuesStandardHighJobsAB48629B",
            "JobQueuesStandardHighDeadLetters1DBA87A2",
            "JobQueuesStandardJobs99096E35",
            "JobQueuesStandardDeadLettersAF84FA18",
            "JobQueuesStandardLowJobs50A56E35",
            "JobQueuesStandardLowDeadLetters941B8170",
            "JobQueuesHeavyHighJobs2B432101",
            "JobQueuesHeavyHighDeadLetters5EB8A8CD",
            "JobQueuesHeavyJobs6BEE80F8",
            "JobQueuesHeavyDeadLettersB58038B4",
            "JobQueuesHeavyLowJobsA45E050C",
            "JobQueuesHeavyLowDeadLetters51AECED2",
            "NotificationsWebhooks8ADB4D79",
            "NotificationsWebhooksDlqCCDE705F",
            "SchedulesFailedFires236BFEBB",
            "JobChangesFailedBatchesCD57FFD8",
        )
    ),
    "AWS::S3::Bucket": dict.fromkeys(("ArtifactsArtifactsBucket87810096",)),
}
# Properties whose change replaces the resource (CloudFormation's "Update requires:
# Replacement"): an explicit name set later is a new resource too.
REPLACING_PROPERTIES = {
    "AWS::DynamoDB::Table": ("TableName",),
    "AWS::SQS::Queue": ("QueueName", "FifoQueue"),
    "AWS::S3::Bucket": ("BucketName",),
}


def test_resources_that_hold_data_keep_their_logical_ids_and_keys(stage_synth) -> None:
    raw = stage_synth.raw
    for cfn_type, pinned in NEVER_REPLACED.items():
        present = of_type(raw, cfn_type)
        for found, keys in pinned.items():
            assert found in present, (
                f"{cfn_type} {found} is gone from the {stage_synth.stage} template: a "
                "renamed or moved construct replaces it (docs/deploy.md, 'Resources that "
                "must never be replaced')"
            )
            props = present[found]["Properties"]
            for prop in REPLACING_PROPERTIES[cfn_type]:
                assert prop not in props, f"{found}: {prop} set, which replaces it"
            if keys is not None:
                schema, indexes = keys
                assert [(k["AttributeName"], k["KeyType"]) for k in props["KeySchema"]] == schema
                index_keys = {
                    i["IndexName"]: [(k["AttributeName"], k["KeyType"]) for k in i["KeySchema"]]
                    for i in props.get("GlobalSecondaryIndexes", [])
                }
                assert index_keys == indexes, found
    if stage_synth.stack.config.backup_retention_days:
        # The vault holds the recovery points: a new vault starts empty.
        assert "BackupsVault1F11AFCC" in of_type(raw, "AWS::Backup::BackupVault")
