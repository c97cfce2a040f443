"""Run the example workflows through the API, as any client would, and check their artifacts."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pagefleet.client import ApiError, ArtifactLink, ChecksumMismatch, Job, PagefleetClient

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples" / "workflows"


def example_files(directory: Path = EXAMPLES_DIR) -> list[Path]:
    return sorted(directory.glob("*.json"))


def load_example(path: Path, site_url: str) -> dict[str, Any]:
    """The workflow with ``inputs.site`` pointing at the running demo site."""
    workflow: dict[str, Any] = json.loads(path.read_text())
    workflow.setdefault("inputs", {})["site"] = site_url
    return workflow


@dataclass
class ArtifactCheck:
    artifact: ArtifactLink
    ok: bool
    problem: str | None = None


@dataclass
class ExampleResult:
    name: str
    path: Path
    job: Job | None = None
    artifacts: list[ArtifactCheck] = field(default_factory=list)
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return (
            self.problem is None
            and self.job is not None
            and self.job.status.value == "succeeded"
            and all(a.ok for a in self.artifacts)
        )


def run_example(
    client: PagefleetClient, path: Path, site_url: str, *, timeout_s: float = 180
) -> ExampleResult:
    result = ExampleResult(name=path.stem, path=path)
    try:
        submitted = client.submit(load_example(path, site_url))
        result.job = job = client.wait(submitted.job_id, timeout=timeout_s, poll=0.5)
        if job.status.value != "succeeded":
            error = job.error
            result.problem = (
                f"{job.status.value}: {error.message}" if error else f"ended {job.status.value}"
            )
            return result
        for artifact in client.artifacts(job.job_id):
            try:
                client.download_verified(artifact)
                result.artifacts.append(ArtifactCheck(artifact, ok=True))
            except (ApiError, ChecksumMismatch) as exc:
                result.artifacts.append(ArtifactCheck(artifact, ok=False, problem=str(exc)))
    except (ApiError, TimeoutError, OSError, ValueError) as exc:
        result.problem = str(exc)
    return result


def run_examples(
    client: PagefleetClient,
    site_url: str,
    *,
    files: list[Path] | None = None,
    timeout_s: float = 180,
) -> list[ExampleResult]:
    """Submit every example at once (they run in parallel on the workers) and check each."""
    paths = files if files is not None else example_files()
    with ThreadPoolExecutor(max_workers=max(1, len(paths))) as pool:
        futures = [
            pool.submit(run_example, client, p, site_url, timeout_s=timeout_s) for p in paths
        ]
        return [f.result() for f in futures]
