"""What the local IAM check adds to an AWS call: the same calls, with and without it.

    .venv/bin/python bench/iam_overhead.py [--rounds 5] [--calls 200]

Two fronts of one embedded AWS in this process (moto's backends are shared): moto alone,
and moto behind ``devstack.iam.guard.IamGuard`` with the synthesized template's policies.
A worker task role and a tenant-tagged job role session make the calls a job makes
(conditional updates, a transaction, queue receives, artifact uploads, usage), alternating
between the fronts round by round; prints each front's time per call and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.common import Measured  # noqa: E402


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(app: Any) -> str:
    from werkzeug.serving import make_server

    port = _port()
    server = make_server("127.0.0.1", port, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{port}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200, help="calls per front per round")
    args = parser.parse_args(argv)

    import boto3
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    from devstack.embedded_aws import prepare_moto
    from devstack.iam.book import Book, access_key
    from devstack.iam.calls import Account
    from devstack.iam.guard import Checker, IamGuard
    from devstack.iam.local import SECRET
    from devstack.iam.synth import synthesized
    from devstack.provision import create_all
    from devstack.tenant_role import create_job_role

    prepare_moto()
    os.environ.update(
        {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        | {"AWS_DEFAULT_REGION": "us-east-1"}
    )
    moto = DomainDispatcherApplication(create_backend_app)
    checker = Checker(
        Book.from_synth(json.loads(synthesized().read_text()), Account("us-east-1", "123456789012"))
    )
    plain, guarded = _serve(moto), _serve(IamGuard(moto, checker))
    local = create_all(*(boto3.client(s, endpoint_url=plain) for s in ("dynamodb", "sqs", "s3")))
    role = create_job_role(boto3.client("iam", endpoint_url=plain))

    def workload(endpoint: str) -> Callable[[int], None]:
        session = boto3.session.Session(
            aws_access_key_id=access_key("worker/standard"), aws_secret_access_key=SECRET
        )
        db = session.client("dynamodb", endpoint_url=endpoint)
        sqs = session.client("sqs", endpoint_url=endpoint)
        creds = session.client("sts", endpoint_url=endpoint).assume_role(
            RoleArn=role, RoleSessionName="tenant-a", Tags=[{"Key": "tenant", "Value": "a"}]
        )["Credentials"]
        tenant = boto3.session.Session(
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
        )
        s3 = tenant.client("s3", endpoint_url=endpoint)
        usage = tenant.client("dynamodb", endpoint_url=endpoint)

        def call(i: int) -> None:
            key = {"pk": {"S": "a"}, "sk": {"S": f"JOB#{i % 50}"}}
            kind = i % 5
            if kind == 0:
                db.update_item(
                    TableName=local.jobs_table,
                    Key=key,
                    UpdateExpression="SET n = :n",
                    ExpressionAttributeValues={":n": {"N": str(i)}},
                )
            elif kind == 1:
                db.get_item(TableName=local.jobs_table, Key=key)
            elif kind == 2:
                sqs.receive_message(QueueUrl=local.queue_urls["standard"], WaitTimeSeconds=0)
            elif kind == 3:
                s3.put_object(Bucket=local.artifacts_bucket, Key=f"a/j/{i % 50}.txt", Body=b"x")
            else:
                usage.update_item(
                    TableName=local.usage_table,
                    Key={"pk": {"S": "TENANT#a"}, "sk": {"S": "DAY#1"}},
                    UpdateExpression="ADD n :one",
                    ExpressionAttributeValues={":one": {"N": "1"}},
                )

        return call

    fronts = {"moto alone": workload(plain), "moto + IAM check": workload(guarded)}
    spent = dict.fromkeys(fronts, 0.0)
    for _ in range(args.rounds):
        for name, call in fronts.items():
            started = time.perf_counter()
            for i in range(args.calls):
                call(i)
            spent[name] += time.perf_counter() - started
    total = args.rounds * args.calls
    for name, seconds in spent.items():
        print(f"{name:18} {seconds / total * 1000:6.2f} ms per call")
    base, checked = spent["moto alone"], spent["moto + IAM check"]
    print(f"ratio (checked / alone): {checked / base:.3f}")
    report = checker.report()
    print(
        f"checks: {report['checks']}, {report['check_seconds'] / report['checks'] * 1e6:.0f} µs "
        f"each, denied {len(report['denied'])}"
    )
    return 0


if __name__ == "__main__":
    with Measured("bench/iam_overhead.py"):
        code = main()
    sys.exit(code)
