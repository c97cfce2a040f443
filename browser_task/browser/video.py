"""A job's video (``options.video``): Playwright's recording, kept like a trace.

Playwright records a context's pages with the ffmpeg build of its own registry: it looks
for ``<browsers path>/ffmpeg-<revision>/ffmpeg-linux``, the revision its driver's
``browsers.json`` names, and fails the context's first page without it. The worker image
(Playwright's own) has it in /ms-playwright; on a machine with Debian's Chromium,
``scripts/ensure-ffmpeg.sh`` links Debian's ffmpeg there (Playwright needs only its VP9
encoder and Matroska demuxer, which Debian's has). ``python -m browser_task.browser.video`` says
whether this worker can record, and the image's build runs it.

The recording is written under the temporary directory while the job runs (the task's
writable /tmp), finished when the context closes, then kept as ``video.webm``: routine
retention when the job succeeded, debug when it failed, like a trace.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import playwright
from playwright.async_api import Error as PlaywrightError

from browser_task.browser.generation import JobBrowser
from browser_task.errors import FailJob, RetryJob, first_line
from browser_task.tenant.artifacts import ArtifactCollector
from pagefleet.specs.resources import DEBUG, ROUTINE

VIDEO_ARTIFACT = "video.webm"
WEBM = "video/webm"


def browsers_path() -> Path:
    """Playwright's registry directory, as its driver computes it on Linux."""
    configured = os.environ.get("PLAYWRIGHT_BROWSERS_PATH")
    if configured and configured != "0":
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ms-playwright"


def ffmpeg_revision() -> str:
    """The ffmpeg revision the installed Playwright driver looks for."""
    listed = Path(playwright.__file__).parent / "driver" / "package" / "browsers.json"
    browsers = json.loads(listed.read_text())["browsers"]
    return str(next(b["revision"] for b in browsers if b["name"] == "ffmpeg"))


def ffmpeg_path() -> Path:
    return browsers_path() / f"ffmpeg-{ffmpeg_revision()}" / "ffmpeg-linux"


def video_problem() -> str | None:
    """Why this worker cannot record a video, or None."""
    path = ffmpeg_path()
    if not os.access(path, os.X_OK):
        return (
            f"video recording needs Playwright's ffmpeg at {path}, which this worker does not "
            "have (make ffmpeg installs it on a development machine)"
        )
    return None


def video_unavailable(problem: str) -> FailJob:
    return FailJob(f"options.video: {problem}", kind="video_unavailable")


def recording_dir() -> str:
    return tempfile.mkdtemp(prefix="pagefleet-video-")


async def keep_video(session: JobBrowser, artifacts: ArtifactCollector, *, failed: bool) -> None:
    """After the session closed: its recording as ``video.webm``, then the files removed.

    Best effort when the job failed (a video must not hide the real error)."""
    if session.video_dir is None:
        return
    try:
        video = session.page.video
        if video is None:
            return
        path = Path(await video.path())
        data = path.read_bytes() if path.exists() else b""
        if data:
            retention = DEBUG if failed else ROUTINE
            if failed:
                with contextlib.suppress(FailJob):
                    artifacts.add(VIDEO_ARTIFACT, data, WEBM, retention=retention)
            else:
                artifacts.add(VIDEO_ARTIFACT, data, WEBM, retention=retention)
    except (OSError, PlaywrightError) as exc:
        if not failed:
            raise RetryJob(
                f"the video could not be kept: {first_line(str(exc))}", kind="video_failed"
            ) from exc
    finally:
        drop_video(session)


def drop_video(session: JobBrowser) -> None:
    if session.video_dir is not None:
        shutil.rmtree(session.video_dir, ignore_errors=True)
        session.video_dir = None


def main() -> int:
    """Exit 0 when this worker can record videos (the image's build checks it)."""
    problem = video_problem()
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    print(f"video recording: {ffmpeg_path()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
