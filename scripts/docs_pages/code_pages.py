"""The limits, steps, CLI and SDK references, from the code's own models and registries."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from docs_pages.schema_fields import rows as field_rows
from docs_pages.table import code, table

FIELD_HEADERS = ("field", "type", "default", "bounds", "what it is")


def _days(seconds: int) -> str:
    return f"{seconds // 3600} h" if seconds < 7 * 86_400 else f"{seconds // 86_400} days"


def limits() -> str:
    from infra.config import STAGES
    from pagefleet.browsing.models import MAX_STEPS_PER_CALL
    from pagefleet.browsing.service import MAX_WAIT_S
    from pagefleet.jobs import record_size, session_terms
    from pagefleet.jobs.checkpoints import MAX_IRREVERSIBLE_STEPS
    from pagefleet.jobs.submission import submission_schema
    from pagefleet.schedules.service import MAX_SCHEDULES_PER_TENANT
    from pagefleet.specs.resources import ARTIFACTS_BUCKET, LEASE_SECONDS, MAX_RECEIVE_COUNT
    from pagefleet.specs.settings import ApiSettings
    from pagefleet.specs.tenant_defaults import LimitDefaults
    from pagefleet.tenancy.admission import MAX_BATCH
    from pagefleet.tenancy.audit import AUDIT_RETENTION_DAYS
    from pagefleet.tenancy.limits import IDEMPOTENCY_TTL_S
    from pagefleet.tenancy.sessions import MAX_SESSION_BYTES

    stages = list(STAGES)
    tenant_rows = [
        (code(name), *(_limit(STAGES[s].tenant_defaults, name) for s in stages))
        for name in LimitDefaults.model_fields
    ]
    stage_rows = [
        ("request body, bytes (413 above)", *(STAGES[s].max_request_bytes for s in stages)),
        ("API requests per second (stage)", *(STAGES[s].api_throttle_rate for s in stages)),
        ("API burst (stage)", *(STAGES[s].api_throttle_burst for s in stages)),
        (
            "a revoked key works for at most, s",
            *(STAGES[s].authorizer_cache_seconds for s in stages),
        ),
    ]
    schema = submission_schema()
    steps_bound = next(
        (o.get("maxItems") for o in schema["properties"]["steps"].get("anyOf", []) if "items" in o),
        None,
    )
    presign = ApiSettings.model_fields["presign_ttl_seconds"]
    bounds = [
        ("steps in a job", steps_bound),
        ("irreversible steps in a job", MAX_IRREVERSIBLE_STEPS),
        ("jobs in `POST /v1/batches`", MAX_BATCH),
        ("the job record (request and result), bytes", record_size.SUBMIT_RECORD_MAX_BYTES),
        (
            "a result kept inline, bytes (larger: `result_artifact`)",
            record_size.INLINE_RESULT_MAX_BYTES,
        ),
        ("an error message, bytes", record_size.ERROR_MESSAGE_MAX_BYTES),
        ("attempts listed on a job", record_size.ATTEMPT_LOG_MAX),
        ("schedules per tenant", MAX_SCHEDULES_PER_TENANT),
        ("a saved login session, bytes", MAX_SESSION_BYTES),
    ]
    rules = {rule.retention_class: rule.expire_days for rule in ARTIFACTS_BUCKET.lifecycle}
    retention = [
        ("routine artifacts (screenshots, extracted data)", f"{rules['routine']} days"),
        ("debug artifacts (failure.png, failure.html, trace.zip, video)", f"{rules['debug']} days"),
        ("saved login sessions", f"the tenant's `session_days`, at most {rules['session']} days"),
        ("the job record", "the tenant's `retention_days` after it finished"),
        ("audit records", f"{AUDIT_RETENTION_DAYS} days"),
        ("an Idempotency-Key (same key and body: the first answer)", _days(IDEMPOTENCY_TTL_S)),
        (
            "a presigned artifact link",
            (
                f"{presign.default} s (a deployment may set {_bound(presign, 'ge')}"
                f"-{_bound(presign, 'le')} s)"
            ),
        ),
    ]
    terms = session_terms.SessionTerms.model_fields
    sessions = [
        (
            "idle before it closes, s",
            session_terms.DEFAULT_IDLE_S,
            f"{_bound(terms['idle_timeout_s'], 'ge')}-{session_terms.MAX_IDLE_S}",
        ),
        (
            "longest life, s",
            session_terms.DEFAULT_MAX_DURATION_S,
            f"{_bound(terms['max_duration_s'], 'ge')}-{session_terms.MAX_DURATION_S}",
        ),
        ("steps per call", MAX_STEPS_PER_CALL, ""),
        ("a call waits for its answer at most, s", MAX_WAIT_S, ""),
    ]
    lease = [
        ("a worker's lease on a running job, s", LEASE_SECONDS),
        ("deliveries before a message goes to the DLQ", MAX_RECEIVE_COUNT),
    ]
    return (
        "# Limits and defaults\n\n"
        "## Tenant limits, by stage\n\nA tenant nobody set limits for has its stage's "
        "defaults; an operator changes one tenant's with `pagefleet admin limits` "
        "(`PATCH /v1/admin/tenants/{tenant}/limits`).\n\n"
        + table(("limit", *stages), tenant_rows)
        + "\n## The API, by stage\n\n"
        + table(("what", *stages), stage_rows)
        + "\n## Bounds of a job\n\nStep fields' own bounds are in [the step table](steps.md).\n\n"
        + table(("what", "at most"), bounds)
        + "\n## Job request defaults\n\n"
        + table(FIELD_HEADERS, field_rows(schema, skip=("steps", "compensate")))
        + "\n### `options`\n\n"
        + table(FIELD_HEADERS, field_rows(schema["$defs"]["JobOptions"]))
        + "\n### `retry`\n\n"
        + table(FIELD_HEADERS, field_rows(schema["$defs"]["RetryPolicy"]))
        + "\n## Retention\n\n"
        + table(("what", "kept"), retention)
        + "\n## Browser sessions\n\n"
        + table(("what", "default", "allowed"), sessions)
        + "\n## Leases and delivery\n\n"
        + table(("what", "value"), lease)
    )


def _limit(defaults: Any, name: str) -> str:
    """What a tenant without limits of its own gets. A default left unset (None) is resolved
    as the code that enforces it resolves it, naming the limit it follows (the one whose
    change moves it)."""
    from pagefleet.jobs.models import TenantPolicy
    from pagefleet.tenancy.limits import effective_limits

    def enforced(stage_defaults: Any) -> Any:
        return getattr(effective_limits(TenantPolicy(), stage_defaults), name)

    value = enforced(defaults)
    if getattr(defaults, name) is not None:
        return str(value)
    follows = [
        other
        for other, current in defaults.model_dump().items()
        if type(current) is int
        and enforced(defaults.model_copy(update={other: current + 1})) != value
    ]
    return f"{value} (= " + ", ".join(code(f) for f in follows) + ")" if follows else str(value)


def _bound(field: Any, name: str) -> Any:
    for meta in field.metadata:
        if hasattr(meta, name):
            return getattr(meta, name)
    raise ValueError(f"no {name} bound")


def _actions(value: Any) -> set[str]:
    """Every step action used anywhere in a JSON value (steps, checks, compensations)."""
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("action"), str):
            found.add(value["action"])
        for item in value.values():
            found |= _actions(item)
    elif isinstance(value, list):
        for item in value:
            found |= _actions(item)
    return found


def examples_by_action() -> dict[str, list[str]]:
    """``examples/``'s files that use each action, by repository path."""
    root = Path(__file__).resolve().parents[2]
    out: dict[str, list[str]] = {}
    for path in sorted((root / "examples").rglob("*.json")):
        for action in _actions(json.loads(path.read_text())):
            out.setdefault(action, []).append(path.relative_to(root).as_posix())
    return out


def steps() -> str:
    from pagefleet.jobs.submission import submission_schema

    schema = submission_schema()
    defs = schema["$defs"]
    step_list = next(o for o in schema["properties"]["steps"]["anyOf"] if "items" in o)
    mapping = step_list["items"]["discriminator"]["mapping"]
    common = ("action",)
    examples = examples_by_action()
    out = [
        (
            "# Workflow steps\n\nEvery step a job's `steps` may hold, from the JSON Schema of a "
            "job request (`GET /v1/workflow.schema.json`, `pagefleet schema`). Each is an object "
            "with its `action`; [the API reference](../api.md#the-workflow-language) shows them "
            "at work.\n\n"
        ),
        table(
            ("action", "what it does"),
            [
                (
                    f"[`{action}`](#{action})",
                    defs[ref.rsplit("/", 1)[-1]].get("description", ""),
                )
                for action, ref in sorted(mapping.items())
            ],
        ),
    ]
    for action, ref in sorted(mapping.items()):
        step = defs[ref.rsplit("/", 1)[-1]]
        out.append(f"\n## {action}\n\n")
        if step.get("description"):
            out.append(" ".join(step["description"].split()) + "\n\n")
        out.append(table(FIELD_HEADERS, field_rows(step, skip=common)))
        if examples.get(action):
            used = ", ".join(code(p) for p in examples[action])
            out.append(f"\nExamples that use it: {used}.\n")
    return "".join(out)


def cli() -> str:
    import typer

    from pagefleet.cli import app

    root = typer.main.get_command(app)
    out = [
        (
            "# CLI\n\n`pagefleet` (`.venv/bin/pagefleet`) reads `PAGEFLEET_API_URL` and "
            "`PAGEFLEET_API_KEY`; `--help` on any command says the same as this page.\n\n"
        )
    ]

    # Typer carries its own click (typer._click): commands are read by their attributes.
    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "commands"):
            for name in sorted(command.commands):
                walk(command.commands[name], [*path, name])
            return
        out.append(f"\n## `pagefleet {' '.join(path)}`\n\n")
        text = inspect.cleandoc(command.help or "").split("\n\n")[0]
        out.append(" ".join(text.split()) + "\n\n")
        rows = []
        for param in command.params:
            if param.name == "help":
                continue
            if param.param_type_name == "argument":
                help_text = getattr(param, "help", None) or ""
                rows.append((code(str(param.name).upper()), f"argument. {help_text}".strip(), ""))
                continue
            names = ", ".join(code(o) for o in [*param.opts, *param.secondary_opts])
            default = (
                ""
                if param.default is None or (param.is_flag and not param.default)
                else param.default
            )
            rows.append((names, param.help or "", code(default) if default != "" else ""))
        if rows:
            out.append(table(("argument or option", "what it is", "default"), rows))

    walk(root, [])
    return "".join(out)
