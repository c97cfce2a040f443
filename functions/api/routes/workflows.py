"""Named workflows: immutable, numbered versions per tenant."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from pydantic import ValidationError

from functions.api.context import base_path, documented, respond, services, tenant_id
from pagefleet.api.workflows import (
    WorkflowDiff,
    WorkflowList,
    WorkflowStored,
    WorkflowSummary,
    WorkflowVersionView,
)
from pagefleet.errors import InvalidField, InvalidRequest, NotFound
from pagefleet.jobs.options import JobOptions
from pagefleet.workflow.versions import (
    NAME_PATTERN,
    WorkflowDefinition,
    WorkflowStore,
    WorkflowVersion,
    diff_versions,
    put_version,
)

router = Router()

NAME = Annotated[
    str, Path(min_length=1, max_length=100, pattern=NAME_PATTERN, description="workflow name")
]
MAX_V = 999_999_999
VERSION = Annotated[int, Path(ge=1, le=MAX_V, description="version number")]


def _store() -> WorkflowStore:
    store = services().workflows
    if store is None:
        raise InvalidRequest("named workflows are not available here", field="name")
    return store


def _view(record: WorkflowVersion, versions: list[int] | None = None) -> WorkflowVersionView:
    return WorkflowVersionView.model_validate(
        {**record.model_dump(mode="json", exclude_none=True), "versions": versions}
    )


@router.put(
    "/workflows/<name>",
    summary="Store a new version of a named workflow",
    description="Each PUT stores the next immutable version (1, 2, ...) and returns it.",
    responses=documented({201: ("the stored version", WorkflowStored)}, 400),
    tags=["workflows"],
)
def put_workflow(name: NAME, definition: Annotated[WorkflowDefinition, Body()]) -> Response[str]:
    try:
        JobOptions.model_validate(definition.options)
    except ValidationError as exc:
        raise InvalidField.from_errors(exc.errors(), within=("options",)) from None
    svc = services()
    stored = put_version(_store(), tenant_id(router), name, definition, svc.lifecycle.at())
    body = WorkflowStored(name=stored.name, version=stored.version, created_at=stored.created_at)
    return respond(
        201, body, {"Location": f"{base_path(router)}/workflows/{name}/versions/{stored.version}"}
    )


@router.get(
    "/workflows",
    summary="The tenant's named workflows, with their latest versions",
    responses=documented({200: ("the workflows", WorkflowList)}),
    tags=["workflows"],
)
def list_workflows() -> Response[str]:
    names = _store().names(tenant_id(router))
    body = WorkflowList(workflows=[WorkflowSummary(name=n, latest_version=v) for n, v in names])
    return respond(200, body)


@router.get(
    "/workflows/<name>",
    summary="A workflow's latest version, and the list of its versions",
    responses=documented({200: ("the latest version", WorkflowVersionView)}, 404),
    tags=["workflows"],
)
def get_workflow(name: NAME) -> Response[str]:
    store, tenant = _store(), tenant_id(router)
    latest = store.latest(tenant, name)
    if latest is None:
        raise NotFound(f"workflow {name} not found", field="name")
    return respond(200, _view(latest, store.versions(tenant, name)))


@router.get(
    "/workflows/<name>/diff",
    summary="What changed between two versions of a workflow",
    description=(
        "A unified diff of the two versions' definitions, each rendered as sorted, indented "
        "JSON (`diff` is empty and `changed` false when they are the same). 404 naming "
        "`name`, `from` or `to` for a workflow or version you do not have; 400 naming "
        "`from` or `to` for a version that is not a number from 1."
    ),
    responses=documented({200: ("the diff", WorkflowDiff)}, 400, 404),
    tags=["workflows"],
)
def diff_workflow(
    name: NAME,
    from_version: Annotated[
        str | None, Query(alias="from", max_length=20, description="the older version")
    ] = None,
    to_version: Annotated[
        str | None, Query(alias="to", max_length=20, description="the newer version")
    ] = None,
) -> Response[str]:
    older, newer = _version_number("from", from_version), _version_number("to", to_version)
    found = diff_versions(_store(), tenant_id(router), name, older, newer)
    body = WorkflowDiff(
        name=found.name,
        from_version=found.from_version,
        to_version=found.to_version,
        diff=found.diff,
        changed=found.changed,
    )
    return respond(200, body)


def _version_number(field: str, text: str | None) -> int:
    if text is None or not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_V:
        raise InvalidRequest(f"{field} must be a version number (1, 2, ...)", field=field)
    return int(text)


@router.get(
    "/workflows/<name>/versions/<version>",
    summary="One version of a workflow",
    responses=documented({200: ("the version", WorkflowVersionView)}, 404),
    tags=["workflows"],
)
def get_workflow_version(name: NAME, version: VERSION) -> Response[str]:
    found = _store().get(tenant_id(router), name, version)
    if found is None:
        raise NotFound(f"workflow {name}@{version} not found", field="version")
    return respond(200, _view(found))
