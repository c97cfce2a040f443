"""Check the locked Python dependencies (uv.lock) against PyPI's advisory data.

    .venv/bin/python scripts/audit.py            # make audit; make test runs it
    .venv/bin/python scripts/audit.py --offline  # only what the local cache holds

Every package uv.lock takes from the registry is looked up in PyPI's JSON API, which carries
the known vulnerabilities (OSV's PyPA advisories). The release's own document
(``/pypi/<name>/<version>/json``) lists exactly the advisories affecting that version; where
it cannot be had (some networks answer only the project's document) the project's document
lists those of its latest release, which count for the locked version too unless it is at or
past one of their fixed versions; the report then says how many locked versions are behind
their latest release and so were checked only against the latest's advisories.

A finding fails the check unless ``security/accepted-findings.toml`` accepts it, by id or
alias, with a reason and a review date not yet passed (docs/runbooks.md, "A dependency
finding"). Lookups are cached a day in ``.cache/audit/`` and kept a week as a fallback: a
slow or unreachable registry costs at most ``--deadline`` seconds, then the audit uses what
the cache holds and says so, or fails saying which packages it could not check (exit 2),
never hangs and never passes silently.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import tomllib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCK = REPO_ROOT / "uv.lock"
ACCEPTED = REPO_ROOT / "security" / "accepted-findings.toml"
CACHE = REPO_ROOT / ".cache" / "audit"
PYPI = "https://pypi.org/pypi"
FRESH_S = 24 * 3600  # a lookup younger than this is not asked again
STALE_S = 7 * 24 * 3600  # the oldest lookup used when the registry cannot be reached
MAX_REVIEW_DAYS = 180  # an acceptance is looked at again at least this often
EXIT_FINDINGS, EXIT_UNCHECKED = 1, 2

# (name, version) -> the release's document, or the project's; None: no such document.
Fetch = Callable[[str, str | None], dict[str, Any] | None]


@dataclass(frozen=True)
class Finding:
    package: str
    version: str
    id: str
    aliases: tuple[str, ...]
    summary: str
    fixed_in: tuple[str, ...]
    exact: bool  # from the release's own document (else: its latest release's)

    def ids(self) -> set[str]:
        return {self.id, *self.aliases}

    def line(self) -> str:
        fix = f"fixed in {', '.join(self.fixed_in)}" if self.fixed_in else "no fixed release yet"
        aliases = f" ({', '.join(self.aliases)})" if self.aliases else ""
        how = "" if self.exact else " [listed for the latest release]"
        return f"{self.package} {self.version}: {self.id}{aliases}, {fix}{how}: {self.summary}"


@dataclass(frozen=True)
class Acceptance:
    id: str
    package: str
    reason: str
    review_by: date


def locked_packages(lock_text: str) -> list[tuple[str, str]]:
    """(name, version) of every package uv.lock takes from a registry (not the project)."""
    lock = tomllib.loads(lock_text)
    return sorted(
        (p["name"], p["version"])
        for p in lock.get("package", [])
        if "registry" in p.get("source", {})
    )


def _release(version: str) -> tuple[Any, ...]:
    """A version as a comparable tuple (PEP 440's common forms; good enough to order fixes)."""
    parts: list[Any] = []
    for piece in re.split(r"[.+-]", version):
        match = re.match(r"(\d+)(.*)", piece)
        parts.append((int(match.group(1)), match.group(2)) if match else (-1, piece))
    return tuple(parts)


def findings_of(name: str, version: str, document: dict[str, Any], exact: bool) -> list[Finding]:
    out = []
    for vuln in document.get("vulnerabilities") or []:
        if vuln.get("withdrawn"):
            continue
        fixed = tuple(str(v) for v in vuln.get("fixed_in") or ())
        if not exact and any(_release(version) >= _release(f) for f in fixed):
            continue  # the latest release's advisory, fixed at or before the locked version
        out.append(
            Finding(
                package=name,
                version=version,
                id=str(vuln["id"]),
                aliases=tuple(str(a) for a in vuln.get("aliases") or ()),
                summary=" ".join(str(vuln.get("summary") or vuln.get("details") or "").split())[
                    :160
                ],
                fixed_in=fixed,
                exact=exact,
            )
        )
    return out


def accepted(text: str, today: date) -> tuple[list[Acceptance], list[str]]:
    """The acceptances in force, and the problems with the file (each one fails the audit)."""
    entries = tomllib.loads(text).get("finding", [])
    out, problems = [], []
    for n, entry in enumerate(entries, 1):
        missing = [k for k in ("id", "package", "reason", "review_by") if not entry.get(k)]
        if missing:
            problems.append(f"accepted finding #{n}: missing {', '.join(missing)}")
            continue
        review_by = entry["review_by"]
        if not isinstance(review_by, date):
            problems.append(f"accepted finding {entry['id']}: review_by must be a date")
            continue
        if review_by < today:
            problems.append(
                f"accepted finding {entry['id']} ({entry['package']}): its review date "
                f"{review_by} has passed: upgrade, or review it and set a new date"
            )
            continue
        if (review_by - today).days > MAX_REVIEW_DAYS:
            problems.append(
                f"accepted finding {entry['id']}: review_by {review_by} is more than "
                f"{MAX_REVIEW_DAYS} days away"
            )
            continue
        out.append(Acceptance(entry["id"], entry["package"], entry["reason"], review_by))
    return out, problems


# --- advisory data: PyPI, through a cache ------------------------------------------------------
def pypi_fetch(timeout_s: float) -> Fetch:
    import httpx

    client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)))

    def fetch(name: str, version: str | None) -> dict[str, Any] | None:
        path = f"{PYPI}/{name}/{version}/json" if version else f"{PYPI}/{name}/json"
        response = client.get(path, headers={"Accept": "application/json"})
        if response.status_code == 404:
            return None
        response.raise_for_status()
        document: dict[str, Any] = response.json()
        return document

    return fetch


@dataclass(frozen=True)
class Lookup:
    document: dict[str, Any]
    exact: bool
    fetched_at: float


def _cache_file(cache: Path, name: str, version: str) -> Path:
    return cache / f"{name}-{version}.json"


def _cached(cache: Path, name: str, version: str, max_age_s: float, now: float) -> Lookup | None:
    try:
        data = json.loads(_cache_file(cache, name, version).read_text())
    except (OSError, ValueError):
        return None
    if now - data["fetched_at"] > max_age_s:
        return None
    return Lookup(data["document"], data["exact"], data["fetched_at"])


def _lookup(fetch: Fetch, name: str, version: str, now: float) -> Lookup:
    document = fetch(name, version)
    if document is not None:
        return Lookup({"vulnerabilities": document.get("vulnerabilities")}, True, now)
    project = fetch(name, None)
    if project is None:
        raise LookupError(f"{name} is not on PyPI")
    latest = str(project.get("info", {}).get("version") or "")
    exact = latest == version
    keep = {"vulnerabilities": project.get("vulnerabilities"), "latest": latest}
    return Lookup(keep, exact, now)


def lookups(
    packages: Iterable[tuple[str, str]],
    fetch: Fetch | None,
    *,
    cache: Path,
    deadline_s: float,
    now: float,
) -> tuple[dict[tuple[str, str], Lookup], dict[tuple[str, str], str], int]:
    """Each package's lookup (fresh from the cache, else fetched, else stale from the cache),
    the packages none could be had for with why, and how many came from a stale cache."""
    found: dict[tuple[str, str], Lookup] = {}
    todo = []
    for key in packages:
        hit = _cached(cache, *key, FRESH_S, now)
        if hit:
            found[key] = hit
        else:
            todo.append(key)
    errors: dict[tuple[str, str], str] = {}
    if todo and fetch is not None:
        pool = ThreadPoolExecutor(max_workers=8)
        futures = {pool.submit(_lookup, fetch, *key, now): key for key in todo}
        done, pending = wait(futures, timeout=deadline_s)
        for future in done:
            key = futures[future]
            try:
                found[key] = future.result()
            except Exception as exc:
                errors[key] = f"{type(exc).__name__}: {exc}"[:200]
            else:
                cache.mkdir(parents=True, exist_ok=True)
                lookup = found[key]
                _cache_file(cache, *key).write_text(
                    json.dumps(
                        {
                            "fetched_at": lookup.fetched_at,
                            "exact": lookup.exact,
                            "document": lookup.document,
                        }
                    )
                )
        for future in pending:
            errors[futures[future]] = f"no answer within {deadline_s:g} s"
        pool.shutdown(wait=False, cancel_futures=True)
    elif todo:
        errors = dict.fromkeys(todo, "offline, and no lookup in the cache younger than a day")
    stale = 0
    for key in list(errors):
        old = _cached(cache, *key, STALE_S, now)
        if old:
            found[key] = old
            del errors[key]
            stale += 1
    return found, errors, stale


# --- the check ---------------------------------------------------------------------------------
def audit(
    lock_text: str,
    accepted_text: str,
    fetch: Fetch | None,
    *,
    cache: Path,
    today: date,
    now: float,
    deadline_s: float = 60.0,
    out: Callable[[str], None] = print,
) -> int:
    packages = locked_packages(lock_text)
    acceptances, problems = accepted(accepted_text, today)
    found, errors, stale = lookups(packages, fetch, cache=cache, deadline_s=deadline_s, now=now)
    findings = [
        finding
        for key, lookup in sorted(found.items())
        for finding in findings_of(*key, lookup.document, lookup.exact)
    ]
    behind = sorted(key for key, lookup in found.items() if not lookup.exact)
    failing = []
    used: set[str] = set()
    for finding in findings:
        match = next(
            (a for a in acceptances if a.package == finding.package and a.id in finding.ids()),
            None,
        )
        if match:
            used.add(match.id)
            out(f"accepted until {match.review_by}: {finding.line()} ({match.reason})")
        else:
            failing.append(finding)
    for acceptance in acceptances:
        if acceptance.id not in used and not errors:
            out(
                f"note: accepted finding {acceptance.id} ({acceptance.package}) is no longer "
                "reported: remove it from security/accepted-findings.toml"
            )
    out(
        f"audit: {len(packages)} locked packages, {len(found)} checked "
        f"({len(found) - len(behind)} against their own release's advisories, {len(behind)} "
        f"behind their latest release against the latest's), {len(findings)} findings, "
        f"{len(findings) - len(failing)} accepted"
        + (f"; {stale} from a cache older than a day (PyPI not answering)" if stale else "")
    )
    if behind:
        out(
            "behind their latest release (checked against its advisories only): "
            + ", ".join(f"{n} {v} < {found[(n, v)].document.get('latest')}" for n, v in behind)
        )
    for problem in problems:
        out(f"error: {problem}")
    for finding in failing:
        out(f"FINDING {finding.line()}")
    if failing:
        out(
            "Upgrade the package (uv lock --upgrade-package NAME), or accept the finding in "
            "security/accepted-findings.toml with its reason and a review date "
            "(docs/runbooks.md, 'A dependency finding')."
        )
    if errors:
        for (name, version), why in sorted(errors.items()):
            out(f"unchecked: {name} {version}: {why}")
        out(
            f"audit: {len(errors)} packages could not be checked against PyPI and the cache "
            "holds no lookup of them from the last week; run `make audit` again once PyPI "
            "answers"
        )
        return EXIT_UNCHECKED
    return EXIT_FINDINGS if failing or problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="use the cache only")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds for all lookups")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    args = parser.parse_args(argv)
    return audit(
        LOCK.read_text(),
        ACCEPTED.read_text() if ACCEPTED.exists() else "",
        None if args.offline else pypi_fetch(args.timeout),
        cache=CACHE,
        today=datetime.now(UTC).date(),
        now=time.time(),
        deadline_s=args.deadline,
    )


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # Not sys.exit: a request still hanging past the deadline must not hold the process.
    os._exit(code)
