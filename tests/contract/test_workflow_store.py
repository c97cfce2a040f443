"""Named workflow versions: numbered from 1, immutable, per tenant, never two of a number."""

from __future__ import annotations

import threading

import pytest

from devstack.fakes.workflows import FakeWorkflowStore
from devstack.provision import Provisioned
from pagefleet.adapters.dynamodb.workflows import DynamoWorkflowStore
from pagefleet.errors import InvalidRequest, NotFound
from pagefleet.runtime import RUNTIME
from pagefleet.specs.stored import STORED
from pagefleet.workflow.versions import (
    WorkflowDefinition,
    WorkflowStore,
    put_version,
    resolve,
)

AT = "2026-11-30T12:00:00.000Z"


def definition(url: str) -> WorkflowDefinition:
    return WorkflowDefinition.model_validate(
        {"steps": [{"action": "goto", "url": url}], "inputs": {"site": "x"}}
    )


@pytest.fixture
def store(backend: str, request: pytest.FixtureRequest) -> WorkflowStore:
    if backend == "fake":
        return FakeWorkflowStore()
    provisioned: Provisioned = request.getfixturevalue("provisioned")
    return DynamoWorkflowStore(RUNTIME.client("dynamodb"), provisioned.jobs_table)


def test_versions_count_up_and_stay_as_stored(store: WorkflowStore) -> None:
    first = put_version(store, "t", "shop", definition("http://a/"), AT)
    second = put_version(store, "t", "shop", definition("http://b/"), AT)
    assert (first.version, second.version) == (1, 2)
    assert store.versions("t", "shop") == [1, 2]
    old = resolve(store, "t", "shop@1")
    assert old.definition.steps[0].model_dump()["url"] == "http://a/"
    assert resolve(store, "t", "shop").version == 2
    assert store.names("t") == [("shop", 2)]


def test_a_version_saved_before_a_rule_reads_as_saved(store: WorkflowStore) -> None:
    """A key the press rule now refuses (2026-12-07): the version still reads, so it can be
    listed and replaced (a job made from it is refused as new, naming the step)."""
    saved = WorkflowDefinition.model_validate(
        {
            "steps": [
                {"action": "goto", "url": "http://a/"},
                {"action": "press", "selector": "#q", "key": "Esc"},
            ],
            "options": {"locale": "root"},
        },
        context=STORED,
    )
    put_version(store, "t", "old", saved, AT)
    read = resolve(store, "t", "old@1").definition
    assert read.steps[1].model_dump()["key"] == "Esc"
    assert read.options == {"locale": "root"}


def test_workflows_are_per_tenant(store: WorkflowStore) -> None:
    put_version(store, "t", "shop", definition("http://a/"), AT)
    with pytest.raises(NotFound):
        resolve(store, "other", "shop")
    with pytest.raises(NotFound):
        resolve(store, "t", "shop@7")
    assert store.names("other") == []


def test_concurrent_pushes_get_distinct_versions(store: WorkflowStore) -> None:
    got: list[int] = []
    barrier = threading.Barrier(4)

    def push(n: int) -> None:
        barrier.wait()
        got.append(put_version(store, "t", "race", definition(f"http://{n}/"), AT).version)

    threads = [threading.Thread(target=push, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got) == [1, 2, 3, 4]
    assert store.versions("t", "race") == [1, 2, 3, 4]


@pytest.mark.parametrize("bad", ["", "a b", "x@", "-lead", "a#b", "x" * 101])
def test_bad_names_and_references_are_refused(store: WorkflowStore, bad: str) -> None:
    with pytest.raises(InvalidRequest):
        put_version(store, "t", bad, definition("http://a/"), AT)
