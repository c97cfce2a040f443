"""The docs site builds strictly (make docs): a broken link, a missing anchor or a page left
out of the nav fails the build, and so make test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
# Not --quiet: it hides the warnings that --strict counts.
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MKDOCS, "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO_ROOT,
        env=ENV,
    )


def test_the_site_builds_strictly_with_every_page(tmp_path: Path) -> None:
    built = _build(REPO_ROOT / "mkdocs.yml", tmp_path / "site")
    # A new guide in docs/ goes into mkdocs.yml's nav (and docs/index.md's table).
    assert built.returncode == 0, built.stderr[-3000:]
    for page in ("index", "api", "deploy", "architecture", "decisions", "reference/errors"):
        assert (tmp_path / "site" / f"{page}.html").exists(), page
    # Every guide in docs/ is in the nav: a page left out fails the strict build.
    guides = {p.name for p in (REPO_ROOT / "docs").glob("*.md")}
    nav = (REPO_ROOT / "mkdocs.yml").read_text()
    assert {g for g in guides if g not in nav} == set()


def _tiny_site(tmp_path: Path, page: str, nav: list[str]) -> Path:
    """A site with the project's own settings (theme, validation) and one page."""
    docs = tmp_path / "docs"
    docs.mkdir(parents=True)
    (docs / "index.md").write_text("# Home\n\n## Here\n")
    (docs / "other.md").write_text(page)
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text().replace("!!python/name:", ""))
    config.pop("markdown_extensions")
    config.update(docs_dir=str(docs), nav=nav)
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_broken_link_or_anchor_or_a_page_left_out_fails_the_build(tmp_path: Path) -> None:
    good = _tiny_site(
        tmp_path / "good", "# Other\n\n[home](index.md#here)\n", ["index.md", "other.md"]
    )
    assert _build(good, tmp_path / "good" / "site").returncode == 0
    broken = _tiny_site(tmp_path / "link", "# Other\n\n[gone](gone.md)\n", ["index.md", "other.md"])
    assert "gone.md" in _build(broken, tmp_path / "link" / "site").stderr
    anchor = _tiny_site(
        tmp_path / "anchor", "# O\n\n[x](index.md#nowhere)\n", ["index.md", "other.md"]
    )
    assert "nowhere" in _build(anchor, tmp_path / "anchor" / "site").stderr
    left_out = _tiny_site(tmp_path / "nav", "# Other\n", ["index.md"])
    built = _build(left_out, tmp_path / "nav" / "site")
    assert built.returncode != 0 and "other.md" in built.stderr
