"""Before the browser: everything that must not fail half-way through a job.

Every ``{{secrets.NAME}}`` is resolved, the tenant's policy is checked for evaluate, the
results of the parent jobs the workflow reads are loaded, and the sessions of the
workflow's leading use_session steps are loaded so the context can be created with them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import ValidationError

from browser_task.browser.video import video_problem, video_unavailable
from browser_task.errors import (
    FailJob,
    JobFailure,
    RetryJob,
    first_line,
)
from browser_task.run.context import PreparedRun, SecretsResolver
from browser_task.run.steps import session
from browser_task.tenant.logins import SessionStore, StorageState
from pagefleet.errors import SecretsUnavailable, SecretUnreadable
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.options import JobOptions
from pagefleet.workflow import Evaluate, Paginate, Step, UseSession, iter_steps
from pagefleet.workflow.templating import mask_secrets, references, render

# (tenant id, job id) -> that job's result (a parent of the job being run).
ParentResults = Callable[[str, str], dict[str, Any] | None]


class TenantPolicies(Protocol):
    """Reads a tenant's policy (``DynamoTenantStore`` is one)."""

    def get_policy(self, tenant_id: str) -> Any: ...


# --- before the browser ---------------------------------------------------------------------
async def resolve_secret(secrets: SecretsResolver, tenant_id: str, name: str) -> str | None:
    """A secret's value; a secret store's trouble becomes the job's failure or retry."""
    try:
        return await secrets.resolve(tenant_id, name)
    except SecretUnreadable as exc:
        raise FailJob(exc.message, kind="secret_unreadable") from None
    except SecretsUnavailable as exc:
        raise RetryJob(exc.message, kind="secrets_unavailable") from None


def _step_paths(request: JobRequest) -> list[tuple[int, str, Step]]:
    """(top-level index, path, step) for every step, nested ones included."""
    out: list[tuple[int, str, Step]] = []
    for path, step in iter_steps(request.steps):
        top = int(path.split(".", 1)[0])
        pretty = f"steps[{path}]".replace(".steps[", "].steps[", 1) if "." in path else path
        out.append((top, pretty, step))
    return out


def _failure_at(
    failure: JobFailure, top: int, path: str, step: Step, masks: set[str]
) -> JobFailure:
    failure.message = mask_secrets(failure.message, masks)
    text = mask_secrets(step.describe(), masks)
    if "." in path:
        text = f"{path} {text}"
    return failure.at_step(top, step_label(step, text))


async def evaluate_allowed(policies: TenantPolicies | None, tenant_id: str) -> bool:
    if policies is None:
        return False
    try:
        policy = await asyncio.to_thread(policies.get_policy, tenant_id)
    except Exception as exc:
        raise RetryJob(
            f"reading the tenant policy failed: {first_line(str(exc))}",
            kind="policy_unavailable",
        ) from None
    return bool(getattr(policy, "allow_evaluate", False))


async def prepare_run(
    request: JobRequest,
    tenant_id: str,
    *,
    secrets: SecretsResolver,
    sessions: SessionStore | None,
    policies: TenantPolicies | None,
    parents: ParentResults | None = None,
) -> PreparedRun:
    """Settle everything that must not fail half-way through; raises JobFailure."""
    if request.options.video and (problem := video_problem()) is not None:
        raise video_unavailable(problem)
    steps = _step_paths(request)
    parent_results = await _parent_results(request, tenant_id, parents)

    resolved: dict[str, str] = {}
    for name in sorted(request.secret_names()):
        value = await resolve_secret(secrets, tenant_id, name)
        if value is None:
            failure = FailJob(f"secret {name} not found", kind="secret_not_found")
            user = next(
                (s for s in steps if ("secrets", name) in set(references(_own_args(s[2])))),
                None,
            )
            if user is not None:
                raise _failure_at(failure, user[0], user[1], user[2], set(resolved.values()))
            raise failure
        resolved[name] = value

    evaluates = [s for s in steps if isinstance(s[2], Evaluate)]
    if evaluates and not await evaluate_allowed(policies, tenant_id):
        top, path, step = evaluates[0]
        failure = FailJob(
            "evaluate is not allowed for this tenant (policy allow_evaluate is off); "
            "ask an administrator to enable it, or remove the evaluate step",
            kind="evaluate_refused",
        )
        raise _failure_at(failure, top, path, step, set(resolved.values()))

    storage_state: StorageState | None = None
    applied: set[int] = set()
    for index, step in enumerate(request.steps):
        if not isinstance(step, UseSession):
            break
        if sessions is None:
            raise _failure_at(session._no_store(), index, str(index), step, set())
        try:
            state = await session.load_state(tenant_id, step, sessions)
        except JobFailure as failure:
            raise _failure_at(failure, index, str(index), step, set()) from None
        applied.add(index)
        if state is not None:
            storage_state = _merge_states(storage_state, state)
    return PreparedRun(
        secrets=resolved,
        storage_state=storage_state,
        applied_sessions=frozenset(applied),
        options=_render_options(request, resolved),
        parents=parent_results,
    )


async def _parent_results(
    request: JobRequest, tenant_id: str, parents: ParentResults | None
) -> dict[str, Any]:
    """The results of the parents the workflow reads (``{{parents.<id>.result...}}``)."""
    wanted = sorted(
        {name for s in request.steps for ns, name in references(s.model_dump()) if ns == "parents"}
    )
    out: dict[str, Any] = {}
    for parent_id in wanted:
        if parents is None:
            raise FailJob("parent results are not available here", kind="invalid_workflow")
        try:
            out[parent_id] = await asyncio.to_thread(parents, tenant_id, parent_id)
        except Exception as exc:
            raise RetryJob(
                f"reading the result of job {parent_id} failed: {first_line(str(exc))}",
                kind="parent_unavailable",
            ) from None
    return out


def _render_options(request: JobRequest, secrets: dict[str, str]) -> JobOptions:
    """The job's options with references substituted (proxy credentials, headers, ...)."""
    raw = request.options.model_dump(exclude_none=True)
    if next(iter(references(raw)), None) is None:
        return request.options
    try:
        return JobOptions.model_validate(render(raw, request.inputs, secrets, {}))
    except KeyError as exc:
        raise FailJob(
            f"options use {{{{{exc.args[0]}}}}}, which has no value", kind="invalid_workflow"
        ) from None
    except ValidationError as exc:
        problem = mask_secrets(exc.errors()[0].get("msg", "invalid value"), set(secrets.values()))
        raise FailJob(
            f"after templating the options are invalid: {problem}", kind="invalid_workflow"
        ) from None


def step_label(step: Step, text: str) -> str:
    """A step as errors and events name it: its label, then its arguments (bounded)."""
    if step.label:
        text = f"{step.label}: {text}"
    return text if len(text) <= 500 else text[:499] + "…"


def _own_args(step: Step) -> dict[str, Any]:
    return step.model_dump(exclude={"steps"} if isinstance(step, Paginate) else None)


def _merge_states(base: StorageState | None, extra: StorageState) -> StorageState:
    """Several leading use_session steps: later sessions win for the same cookie / origin."""
    if base is None:
        return {
            "cookies": list(extra.get("cookies") or []),
            "origins": list(extra.get("origins") or []),
        }
    cookies = {(c.get("name"), c.get("domain"), c.get("path")): c for c in base["cookies"]}
    cookies.update(
        {(c.get("name"), c.get("domain"), c.get("path")): c for c in extra.get("cookies") or []}
    )
    origins = {o.get("origin"): o for o in base["origins"]}
    origins.update({o.get("origin"): o for o in extra.get("origins") or []})
    return {"cookies": list(cookies.values()), "origins": list(origins.values())}
