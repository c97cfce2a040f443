"""Named workflows: immutable, numbered versions per tenant."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from pydantic import ValidationError

from functions.api.context import base_path, documented, respond, services, tenant_id
from pagefleet.api_models import (
    WorkflowList,
    WorkflowStored,
    WorkflowSummary,
    WorkflowVersionView,
)
from pagefleet.errors import InvalidField, InvalidRequest, NotFound
from pagefleet.jobs.submission import field_path
from pagefleet.models import JobOptions
from pagefleet.workflow.versions import (
    NAME_PATTERN,
    WorkflowDefinition,
    WorkflowStore,
    WorkflowVersion,
    put_version,
)

router = Router()

NAME = Annotated[
    str, Path(min_length=1, max_length=100, pattern=NAME_PATTERN, description="workflow name")
]
VERSION = Annotated[int, Path(ge=1, le=999_999_999, description="version number")]


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
        first = exc.errors()[0]
        path = field_path(("options", *first.get("loc", ())))
        raise InvalidField(f"{path}: {first.get('msg', 'invalid')}", field=path) from None
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
