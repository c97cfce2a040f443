"""Before the browser: an attempt's plan (``plan.RunPlan``), settled once, so that nothing
fails half-way through a job that could have failed before it began.

Every ``{{secrets.NAME}}`` is resolved, the tenant's policy is checked for evaluate, the
results of the parent jobs the workflow reads are loaded, every step and the options are
rendered, and the sessions of the workflow's leading use_session steps are loaded so the
context can be created with them. A failure names the step it is about. A browser
session's steps arrive one command at a time: ``render_command`` plans each the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from browser_task.browser.video import video_problem, video_unavailable
from browser_task.errors import FailJob, JobFailure, RetryJob, first_line
from browser_task.run.plan import RunPlan, describe, labels, step_label
from browser_task.run.steps import session
from browser_task.tenant.logins import SessionStore, StorageState
from pagefleet.errors import SecretsUnavailable, SecretUnreadable
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.options import JobOptions
from pagefleet.jobs.ports import ArtifactStore, SecretStore
from pagefleet.jobs.record import JobRecord
from pagefleet.workflow import STEP_ADAPTER, Evaluate, Paginate, Step, UseSession, iter_steps
from pagefleet.workflow.masking import MASK, Masker
from pagefleet.workflow.templating import job_fields, referenced, references, render

# Resolves ``{{secrets.NAME}}`` for a tenant; None when the tenant has no such secret.
SecretsResolver = SecretStore
# (tenant id, job id) -> that job's result (a parent of the job being run).
ParentResults = Callable[[str, str], dict[str, Any] | None]


class TenantPolicies(Protocol):
    """Reads a tenant's policy (``DynamoTenantStore`` is one)."""

    def get_policy(self, tenant_id: str) -> Any: ...


async def prepare_run(
    job: JobRecord,
    *,
    secrets: SecretsResolver,
    sessions: SessionStore | None,
    policies: TenantPolicies | None,
    parents: ParentResults | None = None,
    artifacts: ArtifactStore | None = None,
) -> RunPlan:
    """The attempt's plan; raises ``JobFailure`` (naming the step) for what would fail."""
    request, tenant_id = job.request, job.tenant_id
    if request.replay is not None:
        secrets = MASKED  # a replay never reads the tenant's secrets (pagefleet.jobs.replay)
    if request.options.video and (problem := video_problem()) is not None:
        raise video_unavailable(problem)
    paths = _step_paths(request)
    # The workflow as data, and what each part of it references: one scan for the job.
    raw_steps = [s.model_dump(exclude_none=True) for s in request.steps]
    raw_compensate = [s.model_dump(exclude_none=True) for s in request.compensate or ()]
    raw_options = request.options.model_dump(exclude_none=True)
    refs = referenced([*raw_steps, *raw_compensate, raw_options])
    wanted = {name for part in refs for ns, name in part if ns == "secrets"}
    resolved = await _secrets(sorted(wanted), tenant_id, secrets, paths)
    masker = Masker.of(resolved.values())
    await _evaluate_allowed_or_refused(paths, policies, tenant_id, masker)
    parent_ids = sorted(
        {name for part in refs[: len(raw_steps)] for ns, name in part if ns == "parents"}
    )
    values = _Values(
        request.inputs,
        resolved,
        await _parent_results(parent_ids, tenant_id, parents),
        # Built only for a job that references them (most do not).
        job_fields(job.job_id, job.idempotency_key) if _wants_job(refs) else {},
    )
    steps = _render_all(request.steps, raw_steps, refs[: len(raw_steps)], values, masker)
    compensate = _render_all(
        request.compensate or [],
        raw_compensate,
        refs[len(raw_steps) : -1],
        values,
        masker,
        block="compensate",
    )
    options = request.options if not refs[-1] else _render_options(raw_options, values, masker)
    storage_state, applied = await _leading_sessions(request, tenant_id, sessions)
    return RunPlan(
        tenant_id=tenant_id,
        job_id=job.job_id,
        attempt=job.attempt,
        tries=job.attempts_used,
        request=request,
        options=options,
        steps=steps,
        compensate=compensate,
        labels=labels(request.steps, masker),
        masker=masker,
        idempotency_key=job.idempotency_key,
        storage_state=storage_state,
        applied_sessions=applied,
        replay_har=await _replayed_har(request, artifacts),
    )


async def render_command(
    steps: Sequence[Step], plan: RunPlan, secrets: SecretsResolver, masker: Masker
) -> tuple[list[Step], Masker]:
    """A browser session's command, planned as a job's steps are (its secrets resolved
    now: the session's masker grows with them)."""
    raw = [s.model_dump(exclude_none=True) for s in steps]
    refs = referenced(raw)
    resolved: dict[str, str] = {}
    for name in sorted({name for part in refs for ns, name in part if ns == "secrets"}):
        value = await resolve_secret(secrets, plan.tenant_id, name)
        if value is None:
            raise FailJob(f"secret {name} not found", kind="secret_not_found")
        resolved[name] = value
    masker = masker.with_values(resolved.values())
    values = _Values({}, resolved, {}, job_fields(plan.job_id, plan.idempotency_key))
    return list(_render_all(steps, raw, refs, values, masker, block="command")), masker


# --- the parts --------------------------------------------------------------------------------
class _Masked:
    """An offline replay's secrets: each one ``***``, what its recorded traffic holds."""

    async def resolve(self, tenant_id: str, name: str) -> str | None:
        return MASK


MASKED = _Masked()


async def _replayed_har(request: JobRequest, artifacts: ArtifactStore | None) -> bytes | None:
    replay = request.replay
    if replay is None:
        return None
    if artifacts is None:
        raise FailJob("offline replays are not available here", kind="invalid_workflow")
    try:
        return await asyncio.to_thread(artifacts.get, replay.har_key)
    except Exception as exc:
        raise FailJob(
            f"the har.zip of job {replay.job_id} could not be read ({first_line(str(exc))}); "
            "it may have expired",
            kind="replay_unavailable",
        ) from None


def _wants_job(refs: Sequence[set[tuple[str, str]]]) -> bool:
    return any(ns == "job" for part in refs for ns, _ in part)


class _Values:
    """What references are substituted with."""

    def __init__(
        self,
        inputs: Mapping[str, Any],
        secrets: Mapping[str, str],
        parents: Mapping[str, Any],
        job: Mapping[str, str],
    ) -> None:
        self.inputs, self.secrets, self.parents, self.job = inputs, secrets, parents, job

    def args(
        self,
    ) -> tuple[Mapping[str, Any], Mapping[str, str], Mapping[str, Any], Mapping[str, str]]:
        return self.inputs, self.secrets, self.parents, self.job


def _render_all(
    steps: Sequence[Step],
    raw: list[dict[str, Any]],
    refs: Sequence[set[tuple[str, str]]],
    values: _Values,
    masker: Masker,
    *,
    block: str = "steps",
) -> tuple[Step, ...]:
    """The steps with their references substituted (a step without any is itself), in
    one pass; a failure names the step (a top-level one by its index) with secrets masked."""
    needing = [i for i, part in enumerate(refs) if part]
    if not needing:
        return tuple(steps)
    out = list(steps)
    try:
        rendered = render([raw[i] for i in needing], *values.args())
    except KeyError:
        rendered = None  # which step: each on its own (the failure's path only)
    for place, index in enumerate(needing):
        try:
            one = rendered[place] if rendered is not None else render(raw[index], *values.args())
            out[index] = STEP_ADAPTER.validate_python(one)
        except KeyError as exc:
            failure = FailJob(f"{{{{{exc.args[0]}}}}} has no value", kind="invalid_workflow")
        except ValidationError as exc:
            problem = masker.text(exc.errors()[0].get("msg", "invalid value"))
            failure = FailJob(
                f"after templating the step is invalid: {problem}", kind="invalid_workflow"
            )
        else:
            continue
        if block == "steps":
            raise _failure_at(failure, index, str(index), steps[index], masker) from None
        if block == "compensate":
            failure.message = (
                f"compensate[{index}] {describe(steps[index], masker)}: {failure.message}"
            )
        raise failure from None
    return tuple(out)


async def resolve_secret(secrets: SecretsResolver, tenant_id: str, name: str) -> str | None:
    """A secret's value; a secret store's trouble becomes the job's failure or retry."""
    try:
        return await secrets.resolve(tenant_id, name)
    except SecretUnreadable as exc:
        raise FailJob(exc.message, kind="secret_unreadable") from None
    except SecretsUnavailable as exc:
        raise RetryJob(exc.message, kind="secrets_unavailable") from None


async def _secrets(
    names: list[str],
    tenant_id: str,
    secrets: SecretsResolver,
    paths: list[tuple[int, str, Step]],
) -> dict[str, str]:
    resolved: dict[str, str] = {}
    for name in names:
        value = await resolve_secret(secrets, tenant_id, name)
        if value is None:
            failure = FailJob(f"secret {name} not found", kind="secret_not_found")
            user = next(
                (s for s in paths if ("secrets", name) in set(references(_own_args(s[2])))),
                None,
            )
            if user is not None:
                masker = Masker.of(resolved.values())
                raise _failure_at(failure, user[0], user[1], user[2], masker)
            raise failure
        resolved[name] = value
    return resolved


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


async def _evaluate_allowed_or_refused(
    paths: list[tuple[int, str, Step]],
    policies: TenantPolicies | None,
    tenant_id: str,
    masker: Masker,
) -> None:
    evaluates = [s for s in paths if isinstance(s[2], Evaluate)]
    if evaluates and not await evaluate_allowed(policies, tenant_id):
        top, path, step = evaluates[0]
        failure = FailJob(
            "evaluate is not allowed for this tenant (policy allow_evaluate is off); "
            "ask an administrator to enable it, or remove the evaluate step",
            kind="evaluate_refused",
        )
        raise _failure_at(failure, top, path, step, masker)


async def _leading_sessions(
    request: JobRequest, tenant_id: str, sessions: SessionStore | None
) -> tuple[StorageState | None, frozenset[int]]:
    """The storage state of the workflow's leading use_session steps, and their indexes."""
    storage_state: StorageState | None = None
    applied: set[int] = set()
    for index, step in enumerate(request.steps):
        if not isinstance(step, UseSession):
            break
        if sessions is None:
            raise _failure_at(session._no_store(), index, str(index), step, Masker())
        try:
            state = await session.load_state(tenant_id, step, sessions)
        except JobFailure as failure:
            raise _failure_at(failure, index, str(index), step, Masker()) from None
        applied.add(index)
        if state is not None:
            storage_state = session.merge_states(storage_state, state)
    return storage_state, frozenset(applied)


async def _parent_results(
    wanted: list[str], tenant_id: str, parents: ParentResults | None
) -> dict[str, Any]:
    """The results of the parents the workflow reads (``{{parents.<id>.result...}}``)."""
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


def _render_options(raw: dict[str, Any], values: _Values, masker: Masker) -> JobOptions:
    """The job's options with references substituted (proxy credentials, headers, ...)."""
    try:
        return JobOptions.model_validate(render(raw, values.inputs, values.secrets, {}))
    except KeyError as exc:
        raise FailJob(
            f"options use {{{{{exc.args[0]}}}}}, which has no value", kind="invalid_workflow"
        ) from None
    except ValidationError as exc:
        problem = masker.text(exc.errors()[0].get("msg", "invalid value"))
        raise FailJob(
            f"after templating the options are invalid: {problem}", kind="invalid_workflow"
        ) from None


def _step_paths(request: JobRequest) -> list[tuple[int, str, Step]]:
    """(top-level index, path, step) for every step, nested ones included."""
    out: list[tuple[int, str, Step]] = []
    for path, step in iter_steps(request.steps):
        top = int(path.split(".", 1)[0])
        pretty = f"steps[{path}]".replace(".steps[", "].steps[", 1) if "." in path else path
        out.append((top, pretty, step))
    return out


def _failure_at(failure: JobFailure, top: int, path: str, step: Step, masker: Masker) -> JobFailure:
    failure.message = masker.text(failure.message)
    text = masker.text(step.describe())
    if "." in path:
        text = f"{path} {text}"
    return failure.at_step(top, step_label(step, text))


def _own_args(step: Step) -> dict[str, Any]:
    return step.model_dump(exclude={"steps"} if isinstance(step, Paginate) else None)
