"""The reference pages (docs/reference/) are what the code says: each committed page is
exactly what scripts/docs_reference.py writes from the code now."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "scripts"))

import docs_reference  # noqa: E402
from docs_pages import api_pages  # noqa: E402

REGENERATE = "make docs (or: .venv/bin/python scripts/docs_reference.py)"


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return docs_reference.rendered()


@pytest.mark.parametrize("page", sorted(docs_reference.PAGES))
def test_each_reference_page_is_what_the_code_says(page: str, rendered: dict[str, str]) -> None:
    committed = (docs_reference.REFERENCE_DIR / page).read_text()
    assert committed == rendered[page], f"docs/reference/{page} is stale: run {REGENERATE}"


def test_the_routes_page_lists_every_operation_of_the_openapi_document(
    rendered: dict[str, str],
) -> None:
    import json

    document = json.loads(api_pages.OPENAPI.read_text())
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"`{method.upper()} /v1{path}`" in rendered["routes.md"], (method, path)
    assert "| `GET /v1/openapi.json` |" in rendered["routes.md"]
    row = next(r for r in rendered["routes.md"].splitlines() if r.startswith("| `GET /v1/openapi"))
    assert row.endswith("| no |")  # the public route needs no key


def test_every_error_kind_the_code_raises_is_in_the_catalogue_and_no_other() -> None:
    from pagefleet.jobs.error_kinds import ERROR_KINDS

    raised = api_pages.raised_kinds()
    assert {k.kind for k in ERROR_KINDS} == set(raised)
    assert raised["target_unavailable"] >= {"yes"} and raised["assertion_failed"] == {"no"}
    assert raised["browser_crashed"] == {"yes, on a fresh browser"}


def test_a_kind_missing_from_the_catalogue_fails_the_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pagefleet.jobs import error_kinds

    monkeypatch.setattr(
        error_kinds, "ERROR_KINDS", tuple(k for k in error_kinds.ERROR_KINDS if k.kind != "timeout")
    )
    with pytest.raises(ValueError, match="not listed \\['timeout'\\]"):
        api_pages.errors()


def test_every_cli_command_and_option_is_on_the_cli_page(rendered: dict[str, str]) -> None:
    import typer

    from pagefleet.cli import app

    page = rendered["cli.md"]

    def walk(command: object, path: list[str]) -> None:
        commands = getattr(command, "commands", None)
        if commands is not None:
            for name, sub in commands.items():
                walk(sub, [*path, name])
            return
        assert f"## `pagefleet {' '.join(path)}`" in page, path
        for param in getattr(command, "params", []):
            for option in getattr(param, "opts", []):
                if option.startswith("--") and option != "--help":
                    assert f"`{option}`" in page, (path, option)

    walk(typer.main.get_command(app), [])
    # Commands no doc named before the issue 37 pages.
    for named in ("workflows list", "workflows diff", "schedules pause", "admin signing-secret"):
        assert f"## `pagefleet {named}`" in page


def test_every_public_client_method_is_on_the_sdk_page(rendered: dict[str, str]) -> None:
    import inspect

    from pagefleet.client import PagefleetClient

    for name, _ in inspect.getmembers(PagefleetClient, inspect.isfunction):
        if not name.startswith("_"):
            assert f"| `{name}(" in rendered["sdk.md"], name


def test_the_decision_logs_index_lists_every_entry() -> None:
    from docs_pages.decisions_index import with_index

    text = docs_reference.DECISIONS.read_text()
    assert with_index(text) == text, f"docs/decisions.md's index is stale: run {REGENERATE}"
    entries = text.count("\n## ")
    assert text.split("<!-- /index -->")[0].count("\n- [") == entries


def test_a_superseded_entry_is_marked_in_the_index() -> None:
    from docs_pages.decisions_index import with_index

    text = (
        "# D\n\n## 2026-01-01 — Old\n\nSuperseded by [New](#2026-01-02-new).\n\n"
        "## 2026-01-02 — New\n"
    )
    indexed = with_index(text)
    assert "- [2026-01-01 — Old](#2026-01-01-old) (superseded)" in indexed
    assert "- [2026-01-02 — New](#2026-01-02-new)\n" in indexed
    assert with_index(indexed) == indexed


# A line that records a move names the old path on purpose.
_HISTORY = ("merged into", "moved", "left the path", "renamed", "became", "→")
_CITED = re.compile(
    r"`((?:pagefleet|functions|browser_task|devstack|infra|tests|scripts|bench|docs|examples"
    r"|console)/[A-Za-z0-9_./-]+)`"
)


def _exists(path: str) -> bool:
    """A file, a directory, or ``module.attribute`` of a module that exists."""
    candidates = (path, path.rsplit(".", 1)[0] + ".py", path + ".py")
    return any((REPO_ROOT / c).exists() for c in candidates)


def test_every_path_the_decision_log_cites_exists() -> None:
    dead = []
    for number, line in enumerate(docs_reference.DECISIONS.read_text().splitlines(), 1):
        if line.startswith("|") or any(word in line for word in _HISTORY):
            continue
        dead += [f"{number}: {m}" for m in _CITED.findall(line) if not _exists(m)]
    assert dead == []


def test_every_example_is_named_where_its_feature_is_documented(
    rendered: dict[str, str],
) -> None:
    docs = [p.read_text() for p in (REPO_ROOT / "docs").rglob("*.md")]
    docs.append((REPO_ROOT / "README.md").read_text())
    examples = sorted((REPO_ROOT / "examples").rglob("*.json"))
    unnamed = [
        p.relative_to(REPO_ROOT).as_posix()
        for p in examples
        if not any(p.name in text for text in docs)
    ]
    assert unnamed == []
    # The step table names the examples that use each action.
    assert "`examples/workflows/session-login.json`" in rendered["steps.md"]


def test_the_guides_generated_blocks_are_what_the_code_says() -> None:
    for name, (committed, written) in docs_reference.guides().items():
        assert committed == written, f"docs/{name}'s generated blocks are stale: run {REGENERATE}"


def test_the_cost_tables_price_each_stages_own_task_against_the_target() -> None:
    """The per-job table is the recorded usage priced on the stage's architecture and slots
    (arm64 by default: a hand table at x86_64 prices went unnoticed), and says whether prod
    meets the $0.05 target; the standing table prices min_tasks at that architecture."""
    import dataclasses

    from docs_pages import cost_pages
    from pydantic import TypeAdapter

    from bench.cost import per_thousand
    from infra.config import STAGES
    from infra.constructs.api import pricing_worker
    from pagefleet.pricing import Worker
    from pagefleet.tenancy.usage import UsageRow, priced

    page = cost_pages.per_job()
    prod = TypeAdapter(Worker).validate_python(pricing_worker(STAGES["prod"]))
    assert prod.architecture == "arm64"
    row = per_thousand(UsageRow(tenant_id="t", day="", **cost_pages.recorded()["usage"]))
    retention = STAGES["prod"].tenant_defaults.retention_days
    arm = priced(row, prod, retention)["us-east-1"]["total_usd"]
    x86 = priced(row, dataclasses.replace(prod, architecture="x86_64"), retention)
    prod_row = next(line for line in page.splitlines() if line.startswith("| `prod`"))
    assert f"{prod.slots} slots, arm64 | ${arm:.3f} |" in prod_row
    assert f"${x86['us-east-1']['total_usd']:.3f} |" not in prod_row.split("|")[3]
    assert f"**${arm:.3f} per 1,000 jobs, " in page and "the $0.05 target**" in page
    standing = cost_pages.standing()
    assert "2 x (2 vCPU, 4 GB, arm64): $115" in standing  # at x86_64 prices it was $144


def test_a_generated_block_without_its_renderer_or_missing_from_its_guide_fails() -> None:
    from docs_pages.guide_blocks import with_blocks

    marker = "<!-- generated: {0} (scripts/docs_reference.py; do not edit by hand) -->\n"
    text = f"intro\n{marker.format('a')}old\n<!-- end generated: a -->\nafter\n"
    assert with_blocks(text, {"a": lambda: "new"}) == (
        f"intro\n{marker.format('a')}new\n<!-- end generated: a -->\nafter\n"
    )
    with pytest.raises(ValueError, match="'a' has no renderer"):
        with_blocks(text, {})
    with pytest.raises(ValueError, match=r"\['b'\] are missing"):
        with_blocks(text, {"a": lambda: "new", "b": lambda: "x"})


def _step_actions() -> set[str]:
    from pagefleet.jobs.submission import submission_schema

    steps = submission_schema()["properties"]["steps"]["anyOf"]
    return set(next(o for o in steps if "items" in o)["items"]["discriminator"]["mapping"])


def test_every_step_the_error_catalogue_names_is_a_step_a_job_may_hold() -> None:
    from pagefleet.jobs.error_kinds import ERROR_KINDS

    named = {
        (kind.kind, step)
        for kind in ERROR_KINDS
        for text in (kind.when, kind.todo)
        for step in re.findall(r"`([a-z_]+)` step", text)
    }
    assert named, "the catalogue names steps"
    assert [pair for pair in named if pair[1] not in _step_actions()] == []


def _table(page: str, heading: str) -> list[list[str]]:
    section = page.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[1:]]


def test_every_stage_limit_is_printed_as_the_code_enforces_it(rendered: dict[str, str]) -> None:
    from infra.config import STAGES
    from pagefleet.jobs.models import TenantPolicy
    from pagefleet.tenancy.limits import effective_limits

    page = rendered["limits.md"]
    tenant = _table(page, "Tenant limits, by stage")
    for column, stage in enumerate(STAGES, 1):
        enforced = effective_limits(TenantPolicy(), STAGES[stage].tenant_defaults)
        for row in tenant:
            assert row[column].split(" ")[0] == str(getattr(enforced, row[0].strip("`"))), row
    burst = next(row for row in tenant if row[0] == "`burst`")
    assert all("submits_per_minute" in cell for cell in burst[1:]), burst
    for row in tenant + _table(page, "The API, by stage"):
        assert all(cell and not re.fullmatch(r"\d+\.0", cell) for cell in row), row


def test_every_deployment_setting_is_on_the_settings_page_with_its_meaning(
    rendered: dict[str, str],
) -> None:
    from infra.config import ConsoleConfig, StageConfig
    from infra.pool_config import AgeStep, PoolConfig

    page = rendered["settings.md"]
    for model in (StageConfig, PoolConfig, AgeStep, ConsoleConfig):
        for name in model.model_fields:
            row = next((r for r in page.splitlines() if r.startswith(f"| `{name}` |")), None)
            assert row, f"{model.__name__}.{name} is not on docs/reference/settings.md"
            assert row.rstrip(" |").rsplit("|", 1)[1].strip(), f"{name} has no meaning"
    prod = next(r for r in page.splitlines() if r.startswith("| `nat_gateways` |"))
    assert prod.split(" | ")[3:6] == ["`0`", "`2`", "`1`"]  # dev, prod, ap-south-1


def test_a_setting_without_a_description_or_comment_fails_the_generator() -> None:
    from docs_pages.settings_page import MissingMeaning, field_rows
    from pydantic import BaseModel

    class Documented(BaseModel):
        # Said above the field.
        said: int = 1

    class Undocumented(BaseModel):
        said: int = 1
        silent: int = 2

    assert field_rows(Documented)[0][-1] == "Said above the field."
    with pytest.raises(MissingMeaning, match=r"Undocumented\.said"):
        field_rows(Undocumented)


def test_the_sdk_page_names_the_routes_each_method_calls_and_each_is_in_the_api(
    rendered: dict[str, str],
) -> None:
    import json

    from docs_pages.sdk_page import client_routes, public_methods

    document = json.loads(api_pages.OPENAPI.read_text())
    operations = {(m.upper(), "/v1" + p) for p, ops in document["paths"].items() for m in ops}
    without = set()
    for name, _ in public_methods():
        routes = client_routes(name)
        assert set(routes) <= operations, name
        row = next(r for r in rendered["sdk.md"].splitlines() if r.startswith(f"| `{name}("))
        assert row.endswith(" | " + ", ".join(f"`{m} {p}`" for m, p in routes) + " |"), row
        without |= set() if routes else {name}
    # Only these call no route of the API (the last three read presigned storage links).
    assert without == {"close", "download", "download_verified", "answer_part"}
    assert client_routes("signing_secret") == [
        ("POST", "/v1/notifications/signing-secret/rotate"),
        ("GET", "/v1/notifications/signing-secret"),
    ]
    assert "There is no async client" in rendered["sdk.md"]
