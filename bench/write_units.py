"""DynamoDB's write units a plain job costs in the jobs table, its indexes' counted, read from
the table's stream.

    .venv/bin/python bench/write_units.py [--jobs 20]

On-demand DynamoDB bills "one write request unit for each write (up to 1 KB)", an update
billed on the larger of the item before and after it; and a write to a table bills its
global secondary indexes too: an item that enters an index is a write there, one that leaves
it a write, one whose index key changes two ("one to delete the previous item from the index
and another to put the new item into the index"), and one updated in place while in the
index a write of the attributes it projects
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations.Writes).
The jobs table's indexes project every attribute (`infra/constructs/job_store.py`), so a
job record's update bills each index the job is in as much as the table.

The bench starts the local stack, runs ``--jobs`` plain jobs of one tenant, and reads every
change the jobs table's stream carries meanwhile (its images, old and new: the stack's
stream is the table's own view), sizing each item as DynamoDB sizes one. It prints the write
units a job by where they are billed, beside what the cost model counts for the jobs table
(``pagefleet.tenancy.usage``). A transactional write is billed twice; the stream does not
say which writes were (none of a plain job's in this table is). Counts: they do not depend on
the load.
"""

from __future__ import annotations

import argparse
import base64
import collections
import math
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pagefleet.specs.resources import JOBS_TABLE, IndexSpec  # noqa: E402

KB = 1024


def value_size(value: dict[str, Any]) -> int:
    """A typed attribute value's size as DynamoDB counts it (its name aside)."""
    (kind, data), *_ = value.items()
    if kind == "S":
        return len(str(data).encode())
    if kind == "N":
        return number_size(str(data))
    if kind == "B":
        return len(data if isinstance(data, bytes) else base64.b64decode(data))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in data)
    if kind == "NS":
        return sum(number_size(str(n)) for n in data)
    if kind == "BS":
        return sum(len(b if isinstance(b, bytes) else base64.b64decode(b)) for b in data)
    if kind == "L":  # 3 bytes, and 1 byte an element besides its own size
        return 3 + sum(1 + value_size(v) for v in data)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in data.items())
    raise ValueError(f"unknown DynamoDB type {kind}")


def number_size(text: str) -> int:
    """About 1 byte per two significant digits, and 1 byte."""
    digits = str(Decimal(text).normalize()).lstrip("-").replace(".", "").lstrip("0") or "0"
    digits = digits.split("E")[0]
    return 1 + math.ceil(len(digits) / 2)


def item_size(image: dict[str, Any] | None) -> int:
    if not image:
        return 0
    return sum(len(name.encode()) + value_size(v) for name, v in image.items())


def units(size: int) -> int:
    return max(1, math.ceil(size / KB)) if size else 0


def _index_key(image: dict[str, Any] | None, index: IndexSpec) -> tuple[str, ...] | None:
    """The item's key in ``index``, or None when the item is not in it (sparse)."""
    names = [index.partition_key.name] + ([index.sort_key.name] if index.sort_key else [])
    if not image or any(name not in image for name in names):
        return None
    return tuple(str(image[name]) for name in names)


@dataclass
class Billed:
    """Write units by where they are billed: the table, and each index by name."""

    table: int = 0
    indexes: dict[str, int] = field(default_factory=lambda: collections.defaultdict(int))

    def add(self, other: Billed) -> None:
        self.table += other.table
        for name, n in other.indexes.items():
            self.indexes[name] += n

    @property
    def total(self) -> int:
        return self.table + sum(self.indexes.values())


def write_units(
    old: dict[str, Any] | None, new: dict[str, Any] | None, indexes: Sequence[IndexSpec]
) -> Billed:
    """What one write that turned ``old`` into ``new`` (None: no item) bills, every index
    projecting the whole item."""
    before, after = item_size(old), item_size(new)
    billed = Billed(table=units(max(before, after)))
    for index in indexes:
        was, now = _index_key(old, index), _index_key(new, index)
        if was is not None and now is not None:
            if was != now:  # deleted from the index, and put again
                billed.indexes[index.name] += units(before) + units(after)
            elif old != new:
                billed.indexes[index.name] += units(max(before, after))
        elif was is not None:
            billed.indexes[index.name] += units(before)
        elif now is not None:
            billed.indexes[index.name] += units(after)
    return billed


def stream_changes(
    streams: Any, arn: str, since: dict[str, str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every stream record after ``since`` (each shard's last sequence number read), with
    its shard."""
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        shard_id = shard["ShardId"]
        kwargs: dict[str, Any] = {"StreamArn": arn, "ShardId": shard_id}
        if shard_id in since:
            kwargs.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=since[shard_id])
        else:
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
        iterator = streams.get_shard_iterator(**kwargs)["ShardIterator"]
        while iterator:
            answer = streams.get_records(ShardIterator=iterator, Limit=1000)
            for record in answer["Records"]:
                yield shard_id, record
            if not answer["Records"]:
                break
            iterator = answer.get("NextShardIterator")


def last_read(streams: Any, arn: str) -> dict[str, str]:
    """Each shard's last sequence number now: where a measurement starts."""
    return {
        shard: record["dynamodb"]["SequenceNumber"]
        for shard, record in stream_changes(streams, arn, {})
    }


def change_kind(record: dict[str, Any]) -> str:
    """What a change was: its item's kind, and a job record's move (``queued -> running``)."""
    change = record["dynamodb"]
    old, new = change.get("OldImage") or {}, change.get("NewImage") or {}
    kind = str((new or old).get("sk", {}).get("S", "")).split("#")[0]
    if kind == "JOB" and old and new:
        before, after = old["status"]["S"], new["status"]["S"]
        if before != after:
            return f"job {before} -> {after}"
        return f"job {before} (lease)" if before == "running" else f"job {before}, marked"
    return f"{record['eventName'].lower()} {kind.lower()}"


def billed_by_changes(records: Sequence[dict[str, Any]]) -> dict[str, tuple[int, Billed]]:
    """The write units ``records`` bill by kind of change (``change_kind``), with how many."""
    out: dict[str, tuple[int, Billed]] = {}
    for record in records:
        change = record["dynamodb"]
        billed = write_units(change.get("OldImage"), change.get("NewImage"), JOBS_TABLE.indexes)
        kind = change_kind(record)
        count, total = out.get(kind, (0, Billed()))
        total.add(billed)
        out[kind] = (count + 1, total)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()

    from bench.aws_requests import plain_job
    from devstack.stack import LocalStack
    from pagefleet.runtime import RUNTIME

    with LocalStack(api_port=0, workers=1) as stack:
        assert stack.worker_settings is not None
        streams = RUNTIME.client("dynamodbstreams")
        table = stack.worker_settings.jobs_table
        arn = RUNTIME.client("dynamodb").describe_table(TableName=table)["Table"]["LatestStreamArn"]
        with stack.client() as api:  # warm-up: the measured jobs meet a warm worker
            api.wait(api.submit(plain_job(stack.site_url)).job_id, timeout=120)
            time.sleep(2)
            since = last_read(streams, arn)
            ids = [api.submit(plain_job(stack.site_url)).job_id for _ in range(args.jobs)]
            done = [api.wait(job_id, timeout=300) for job_id in ids]
        time.sleep(3)  # the stream reader's marks after the last outcome
        records = [record for _, record in stream_changes(streams, arn, since)]
    succeeded = sum(1 for j in done if j.status.value == "succeeded")
    if succeeded != args.jobs:
        print(f"no figure: {succeeded} of {args.jobs} jobs succeeded")
        return 1
    by_kind = billed_by_changes(records)
    per = args.jobs
    names = [i.name for i in JOBS_TABLE.indexes]
    print(f"{per} plain jobs; the jobs table's write units a job, by change (changes a job):")
    print(f"  {'change':34} {'n':>5} {'table':>6} " + " ".join(f"{n:>9}" for n in names))
    whole = Billed()
    for kind, (count, billed) in sorted(by_kind.items()):
        whole.add(billed)
        cells = " ".join(f"{billed.indexes.get(n, 0) / per:9.2f}" for n in names)
        print(f"  {kind:34} {count / per:5.2f} {billed.table / per:6.2f} {cells}")
    cells = " ".join(f"{whole.indexes.get(n, 0) / per:9.2f}" for n in names)
    print(f"  {'all':34} {'':5} {whole.table / per:6.2f} {cells}")
    print(
        f"write units a job in the jobs table: {whole.total / per:.1f} "
        f"({whole.table / per:.1f} the table, {(whole.total - whole.table) / per:.1f} its indexes)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
