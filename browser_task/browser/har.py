"""A job's HAR (``options.har``): the run's traffic, redacted, kept like a trace.

Playwright records the context's requests and responses as the context opens
(``record_har_path``, a zip: the log plus each body as a file of its own) and writes the
zip when the context closes. Before anything is kept, the zip is rewritten: the values of
``Authorization``, ``Proxy-Authorization``, ``Cookie`` and ``Set-Cookie`` (and the cookies
the log lists apart) become ``***``, and the job's secrets, in every form the run's
``Masker`` knows (pagefleet.workflow.masking), are masked in every string of the log and
in every body file. Only the rewritten zip is uploaded, as ``har.zip`` with its sha256:
routine retention when the job succeeded, debug when it failed (as a trace). With
``"on_failure"`` a succeeded attempt drops its recording unkept.

A masked secret leaves ``***`` where it was; an offline replay renders every
``{{secrets.NAME}}`` as ``***`` too (browser_task.run.prepare), so a request that carried a
secret still finds its recording.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import tempfile
import zipfile
from typing import Any

from browser_task.browser.generation import JobBrowser
from browser_task.errors import FailJob, RetryJob
from browser_task.tenant.artifacts import ArtifactCollector
from pagefleet.specs.resources import DEBUG, ROUTINE
from pagefleet.workflow.masking import MASK, Masker

HAR_ARTIFACT = "har.zip"
HAR_LOG = "har.har"
# Headers whose values are credentials, whatever the job's secrets are.
REDACTED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})


def har_file() -> str:
    """Where a context records its HAR (a directory of its own, removed once kept)."""
    return os.path.join(tempfile.mkdtemp(prefix="pagefleet-har-"), HAR_ARTIFACT)


def redact(recorded: bytes, masker: Masker) -> bytes:
    """The zip as it may be kept: credentials' headers and cookies, and the job's secrets,
    masked in the log and in every body."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(recorded)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith(".har"):
                data = json.dumps(_log(json.loads(data), masker)).encode()
            elif masker:
                data = masker.bytes(data)
            target.writestr(info.filename, data)
    return out.getvalue()


def _log(har: dict[str, Any], masker: Masker) -> dict[str, Any]:
    for entry in har.get("log", {}).get("entries", []):
        for part in (entry.get("request") or {}, entry.get("response") or {}):
            for header in part.get("headers") or []:
                if str(header.get("name", "")).lower() in REDACTED_HEADERS:
                    header["value"] = MASK
            for cookie in part.get("cookies") or []:
                cookie["value"] = MASK
            content = part.get("content") or {}
            if masker and content.get("encoding") == "base64" and "text" in content:
                raw = masker.bytes(base64.b64decode(content["text"]))
                content["text"] = base64.b64encode(raw).decode()
    masked: dict[str, Any] = masker.value(har)
    return masked


async def keep_har(
    session: JobBrowser,
    artifacts: ArtifactCollector,
    *,
    failed: bool,
    requested: bool | str,
    masker: Masker,
) -> None:
    """After the session closed: its HAR redacted and kept (or dropped), then the files
    removed. A HAR that cannot be kept never hides a failure; a requested one that cannot
    be kept fails a run that succeeded (as a trace does)."""
    path = session.har_path
    if path is None:
        return
    try:
        if not failed and requested == "on_failure":
            return
        try:
            with open(path, "rb") as recorded:
                data = redact(recorded.read(), masker)
        except (OSError, zipfile.BadZipFile, ValueError):
            if failed:
                return
            raise RetryJob("the HAR could not be written", kind="har_failed") from None
        if failed:
            with contextlib.suppress(FailJob):  # too large: the real failure stays
                artifacts.add(HAR_ARTIFACT, data, "application/zip", retention=DEBUG)
        else:
            artifacts.add(HAR_ARTIFACT, data, "application/zip", retention=ROUTINE)
    finally:
        drop_har(session)


def drop_har(session: JobBrowser) -> None:
    if session.har_path is not None:
        shutil.rmtree(os.path.dirname(session.har_path), ignore_errors=True)
        session.har_path = None
