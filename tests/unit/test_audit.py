"""make audit (scripts/audit.py): the locked dependencies against PyPI's advisory data, fed
here from recorded documents (no network): an unaccepted finding fails, an accepted one
passes until its review date, a registry that does not answer ends in a clear exit, never a
hang and never a silent pass."""

from __future__ import annotations

import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import audit

LOCK = """
version = 1
[[package]]
name = "jinja2"
version = "3.1.4"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "httpx"
version = "0.28.1"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "pagefleet"
version = "0.1.0"
source = { editable = "." }
"""
# What PyPI's JSON API answers for jinja2 3.1.4 (abridged from the recorded document).
JINJA2_ADVISORY = {
    "aliases": ["CVE-2024-56201"],
    "details": "A bug in the Jinja compiler allows an attacker that controls both the content "
    "and filename of a template to execute arbitrary Python code.",
    "fixed_in": ["3.1.5"],
    "id": "GHSA-gmj6-6f8f-6699",
    "link": "https://osv.dev/vulnerability/GHSA-gmj6-6f8f-6699",
    "source": "osv",
    "summary": "Jinja has a sandbox breakout through malicious filenames",
    "withdrawn": None,
}
RELEASES: dict[tuple[str, str | None], dict[str, Any] | None] = {
    ("jinja2", "3.1.4"): {"info": {"version": "3.1.4"}, "vulnerabilities": [JINJA2_ADVISORY]},
    ("httpx", "0.28.1"): {"info": {"version": "0.28.1"}, "vulnerabilities": []},
}
TODAY = date(2026, 12, 5)


def recorded(documents: dict[tuple[str, str | None], dict[str, Any] | None]) -> audit.Fetch:
    def fetch(name: str, version: str | None) -> dict[str, Any] | None:
        return documents.get((name, version))

    return fetch


def run(
    tmp_path: Path, fetch: audit.Fetch | None, accepted: str = "", **kwargs: Any
) -> tuple[int, str]:
    lines: list[str] = []
    code = audit.audit(
        LOCK,
        accepted,
        fetch,
        cache=tmp_path / "cache",
        today=kwargs.pop("today", TODAY),
        now=kwargs.pop("now", time.time()),
        out=lines.append,
        **kwargs,
    )
    return code, "\n".join(lines)


def acceptance(review_by: str, reason: str = "templates are ours, never a user's") -> str:
    return (
        '[[finding]]\nid = "CVE-2024-56201"\npackage = "jinja2"\n'
        f'reason = "{reason}"\nreview_by = {review_by}\n'
    )


def test_only_registry_packages_of_the_lock_are_audited() -> None:
    assert audit.locked_packages(LOCK) == [("httpx", "0.28.1"), ("jinja2", "3.1.4")]


def test_an_unaccepted_finding_fails_naming_the_advisory_and_the_fix(tmp_path: Path) -> None:
    code, report = run(tmp_path, recorded(RELEASES))
    assert code == audit.EXIT_FINDINGS
    assert (
        "FINDING jinja2 3.1.4: GHSA-gmj6-6f8f-6699 (CVE-2024-56201), fixed in 3.1.5: "
        "Jinja has a sandbox breakout" in report
    )
    assert "security/accepted-findings.toml" in report
    assert "2 locked packages, 2 checked" in report and "1 findings, 0 accepted" in report


def test_an_accepted_finding_passes_until_its_review_date(tmp_path: Path) -> None:
    code, report = run(tmp_path, recorded(RELEASES), acceptance("2027-01-15"))
    assert code == 0, report
    assert "accepted until 2027-01-15: jinja2 3.1.4: GHSA-gmj6-6f8f-6699" in report
    assert "(templates are ours, never a user's)" in report
    # The day after its review date it fails again, saying why.
    code, report = run(
        tmp_path, recorded(RELEASES), acceptance("2027-01-15"), today=date(2027, 1, 16)
    )
    assert code == audit.EXIT_FINDINGS
    assert "review date 2027-01-15 has passed" in report and "FINDING jinja2" in report


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (acceptance("2027-01-15", reason=""), "missing reason"),
        (acceptance("2028-01-15"), "more than 180 days away"),
        (acceptance('"soon"'), "review_by must be a date"),
    ],
)
def test_an_acceptance_needs_a_reason_and_a_near_review_date(
    tmp_path: Path, entry: str, problem: str
) -> None:
    code, report = run(tmp_path, recorded(RELEASES), entry)
    assert code == audit.EXIT_FINDINGS and problem in report


def test_without_the_releases_document_the_latest_releases_advisories_count(
    tmp_path: Path,
) -> None:
    """Where only the project's document answers (its latest release's advisories), one
    still open at the latest counts for an older locked version; one fixed at or before the
    locked version does not."""
    open_at_latest = {**JINJA2_ADVISORY, "id": "GHSA-open", "fixed_in": []}
    fixed_before = {**JINJA2_ADVISORY, "id": "GHSA-fixed", "fixed_in": ["3.1.2"]}
    project = {"info": {"version": "3.1.6"}, "vulnerabilities": [open_at_latest, fixed_before]}
    documents = {("jinja2", None): project, ("httpx", "0.28.1"): RELEASES[("httpx", "0.28.1")]}
    code, report = run(tmp_path, recorded(documents))
    assert code == audit.EXIT_FINDINGS
    assert (
        "FINDING jinja2 3.1.4: GHSA-open" in report and "[listed for the latest release]" in report
    )
    assert "GHSA-fixed" not in report
    assert "1 behind their latest release" in report


def test_a_registry_that_does_not_answer_ends_clearly_and_the_cache_stands_in(
    tmp_path: Path,
) -> None:
    import httpx

    def unreachable(name: str, version: str | None) -> dict[str, Any] | None:
        raise httpx.ConnectTimeout("timed out")

    code, report = run(tmp_path, unreachable)
    assert code == audit.EXIT_UNCHECKED
    assert "unchecked: jinja2 3.1.4: ConnectTimeout: timed out" in report
    assert "run `make audit` again once PyPI answers" in report
    # Once looked up, a lookup up to a week old stands in when PyPI does not answer (and says so).
    start = time.time()
    assert run(tmp_path, recorded(RELEASES), now=start)[0] == audit.EXIT_FINDINGS
    code, report = run(tmp_path, unreachable, now=start + 3 * 86400)
    assert code == audit.EXIT_FINDINGS and "FINDING jinja2 3.1.4" in report
    assert "2 from a cache older than a day" in report
    assert run(tmp_path, unreachable, now=start + 8 * 86400)[0] == audit.EXIT_UNCHECKED


def test_a_slow_registry_costs_at_most_the_deadline(tmp_path: Path) -> None:
    import threading

    release = threading.Event()

    def hanging(name: str, version: str | None) -> dict[str, Any] | None:
        release.wait(30)
        return None

    try:
        code, report = run(tmp_path, hanging, deadline_s=0.2)
    finally:
        release.set()
    assert code == audit.EXIT_UNCHECKED
    assert "no answer within 0.2 s" in report
