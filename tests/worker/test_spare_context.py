"""The spare context (browser_task.browser.spare): a job whose context would be the default
one starts on a context made before it came, and that context is as fresh as one made for it:
no job ever sees what another left."""

from __future__ import annotations

import asyncio
from typing import Any

from browser_task.browser.pool import BrowserPool
from pagefleet.jobs.options import JobOptions
from pagefleet.jobs.states import JobStatus
from tests.worker.conftest import submit, wait_for_job

# Shows the cookie and the storage it found, then leaves some of each.
LEFTOVERS_PAGE = """<title>c</title><p id=c>?</p>
<script>
  const found = (document.cookie || "none") + "|" + (localStorage.getItem("k") || "none");
  document.getElementById("c").textContent = found;
  document.cookie = "seen=1; path=/";
  localStorage.setItem("k", "left");
</script>"""


def _job(url: str, **options: Any) -> dict[str, Any]:
    return {
        "steps": [
            {"action": "goto", "url": url},
            {"action": "extract", "name": "found", "selector": "#c"},
        ],
        "max_attempts": 1,
        "options": options,
    }


def test_default_jobs_start_on_a_spare_context_and_never_see_anothers_leftovers(
    run_worker, services, make_settings, site
) -> None:
    url = site.add("/leftovers", LEFTOVERS_PAGE)
    running = run_worker(make_settings(concurrency=1))
    spare = running.worker.browsers.spare
    found = []
    for _ in range(3):
        job = wait_for_job(services, submit(services, _job(url)).job_id)
        assert job.status is JobStatus.SUCCEEDED, job.error
        found.append(job.result["found"] if job.result else None)
    assert found == ["none|none"] * 3
    # Each ran on a spare: the first on the one made at start, the others on the one made
    # when the job before closed its context.
    assert spare.taken == 3
    # A job that asks for another context than the default gets its own.
    other = wait_for_job(services, submit(services, _job(url, user_agent="pagefleet-test")).job_id)
    assert other.status is JobStatus.SUCCEEDED, other.error
    assert other.result == {"found": "none|none"}
    assert spare.taken == 3


async def _made(pool: BrowserPool) -> None:
    assert pool.spare is not None
    making = pool.spare._making
    assert making is not None
    await making


def test_a_spare_on_a_retired_browser_is_closed_unused_and_none_outlives_the_pool(
    make_settings,
) -> None:
    async def go() -> tuple[int, int, int, dict[int, int]]:
        pool = BrowserPool(make_settings(concurrency=1))
        await pool.start()
        try:
            spare = pool.spare
            assert spare is not None
            first = await pool.new_session(JobOptions())  # the spare made at start
            old = first.generation
            await first.close()  # makes the next spare, on the same browser
            await _made(pool)
            pool._retire(old, "test")  # as a recycle would
            second = await pool.new_session(JobOptions())
            # Not the spare: it was on the retired browser, which closes when idle.
            assert second.generation is not old
            await second.close()
            await _made(pool)  # the next spare, made in the background
            contexts = {g.number: len(g.browser.contexts) for g in pool._generations}
            return spare.made, spare.taken, pool.launches, contexts
        finally:
            await pool.close()

    made, taken, launches, contexts = asyncio.run(go())
    assert (taken, launches) == (1, 2)
    assert made == 3  # at start, after the first job, after the second
    # The retired browser's spare was closed; the new browser holds only its own spare.
    assert contexts == {1: 0, 2: 1}
