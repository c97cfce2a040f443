"""botocore's endpoint table, holding only the services our processes call.

botocore reads its endpoint table (``endpoints.json``: every partition's regions and ~300
services' endpoints) when a session makes its first client, and keeps it for the process's
life: 4.1 MB of Python objects, in every worker and every Lambda function, of which a
process uses the entries of the few services it calls. ``services_we_call`` keeps those and
leaves the rest unread: a service outside ``ENDPOINT_PREFIXES`` (an operator's script
calling IAM, say) makes the whole table be read again, once, and is answered from it. What
botocore sees answers every question as the whole table does
(``tests/unit/test_endpoint_table.py`` compares every service in every partition).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

# The endpoint prefixes (a service model's ``endpointPrefix``, the table's key) of the
# services the runtime makes clients of; a test keeps it in step with pagefleet.runtime.
ENDPOINT_PREFIXES = frozenset(
    {
        "dynamodb",
        "streams.dynamodb",  # dynamodbstreams
        "sqs",
        "s3",
        "secretsmanager",
        "scheduler",
        "sts",
        "events",
        "execute-api",  # apigatewaymanagementapi
    }
)

Table = dict[str, Any]


def services_we_call(table: Table, read_again: Callable[[], Table]) -> Table:
    """``table`` with each partition's ``services`` cut to ``ENDPOINT_PREFIXES``, the rest
    read again through ``read_again`` (the whole file, parsed) the first time it is asked
    for. ``table`` is changed in place and returned."""
    whole = _WholeTable(read_again)
    for partition in table.get("partitions", []):
        services = partition.get("services", {})
        kept = {name: services[name] for name in ENDPOINT_PREFIXES if name in services}
        partition["services"] = _Services(kept, partition.get("partition", ""), whole)
    return table


class _WholeTable:
    """The whole table, read on first need, once."""

    def __init__(self, read: Callable[[], Table]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._services: dict[str, dict[str, Any]] | None = None

    def services(self, partition: str) -> dict[str, Any]:
        with self._lock:
            if self._services is None:
                self._services = {
                    p.get("partition", ""): p.get("services", {})
                    for p in self._read().get("partitions", [])
                }
            return self._services.get(partition, {})


class _Services(Mapping[str, Any]):
    """A partition's services: the kept ones at hand, any other from the whole table. One of
    ours that the partition lacks (API Gateway's ``execute-api``: botocore then uses the
    partition's defaults) is known absent without reading the rest."""

    def __init__(self, kept: dict[str, Any], partition: str, whole: _WholeTable) -> None:
        self._kept = kept
        self._absent = ENDPOINT_PREFIXES - kept.keys()
        self._partition = partition
        self._whole = whole

    def __getitem__(self, name: str) -> Any:
        if name in self._kept:
            return self._kept[name]
        if name in self._absent:
            raise KeyError(name)
        return self._whole.services(self._partition)[name]

    def __contains__(self, name: object) -> bool:
        if name in self._kept:
            return True
        if name in self._absent:
            return False
        return name in self._whole.services(self._partition)

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole.services(self._partition))

    def __len__(self) -> int:
        return len(self._whole.services(self._partition))
