"""Every id format comes from ``pagefleet.ids``: the OpenAPI document's patterns are its own
or one of the few named here that are not ids, and no module writes an id format inline."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pagefleet import ids
from pagefleet.live.service import Subscribe

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "docs" / "openapi.json"
# Patterns of the document that are not ids (each where it is defined).
NOT_IDS = {
    r"^\d{4}-\d{2}-\d{2}$",  # a day (usage routes)
    r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$",  # a locale (jobs/options.py)
    r"^[A-Za-z0-9.:\[\]-]+$",  # a breaker's domain (admin routes)
    r"^[^/\\]+$",  # an upload's file name (steps/interaction.py)
    r"^[A-Za-z_][A-Za-z0-9_]*$",  # a job input's name (steps/interaction.py)
    r"^[A-Za-z0-9][A-Za-z0-9._-]*$",  # an artifact's name (steps/base.py, capture.py)
    r"^[A-Za-z_][A-Za-z0-9_.-]*$",  # a result's name (steps/extraction.py, control.py)
    r"^[a-z]{2}(-[a-z]+)+-\d$",  # an AWS region (specs/pools.py, a job's requires)
}


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        for value in node.values():
            yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


def test_every_pattern_of_the_openapi_document_is_an_id_of_the_ids_module_or_named() -> None:
    found = set(_patterns(json.loads(OPENAPI.read_text())))
    assert ids.ULID in found and ids.TENANT_ID in found  # the document was read
    unknown = found - ids.PATTERNS - NOT_IDS
    assert unknown == set(), f"id formats not from pagefleet.ids: {unknown}"


def test_no_module_writes_a_ulid_or_a_loose_job_id_inline() -> None:
    inline = re.compile(r"\{26\}|\{25\}|\{1,64\}|0-9a-zA-Z\]|0-9a-z\]\+")
    home = ROOT / "pagefleet" / "ids.py"
    found = [
        p.relative_to(ROOT).as_posix()
        for top in ("pagefleet", "functions", "browser_task", "devstack")
        for p in sorted((ROOT / top).rglob("*.py"))
        if p != home and inline.search(p.read_text())
    ]
    assert found == [], f"use pagefleet.ids instead: {found}"


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("01jt8k3m5n7p9q2r4s6v8w0x1y", True),
        ("0" * 26, True),
        ("0" * 25, False),
        ("0" * 27, False),
        ("01J" + "0" * 23, False),  # upper case: ids are minted lower case
        ("abc", False),  # the live channel took 1 to 64 characters
        ("a" * 64, False),
    ],
)
def test_a_ulid_is_26_lower_case_characters(text: str, ok: bool) -> None:
    assert ids.is_ulid(text) is ok


def test_a_minted_ulid_has_the_format() -> None:
    assert ids.is_ulid(ids.new_ulid())


def test_a_live_subscription_names_a_job_by_its_id_format() -> None:
    assert Subscribe(action="subscribe", job_id="0" * 26).job_id == "0" * 26
    for loose in ("abc", "a" * 64):
        with pytest.raises(ValidationError, match="job_id"):
            Subscribe(action="subscribe", job_id=loose)


def test_a_tenant_id_is_the_routes_pattern_whole() -> None:
    assert ids.is_tenant_id("acme") and ids.is_tenant_id("A_b-9" + "x" * 123)
    for bad in ("", "café", "١٢٣", "a" * 129, "acme\n", "acme corp", "acme/ops"):
        assert not ids.is_tenant_id(bad), bad
