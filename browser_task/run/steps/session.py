"""save_session and use_session: Playwright storage state kept per tenant (see sessions.py).

A leading use_session is applied when the context is created (``storage_state``), which is
the only way Playwright restores local storage for every origin before the first page
loads. A use_session later in the workflow adds the cookies to the live context and
restores local storage with an init script (on the next navigation) and, for the page
already open at that origin, right away. save_session keeps IndexedDB too (sites that keep
their login there); only a leading use_session restores it (Playwright does, with the
context's storage state): a later one restores cookies and local storage only.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from browser_task.errors import FailJob, RetryJob, first_line
from browser_task.run.context import RunContext
from browser_task.tenant.logins import StorageState
from pagefleet.workflow import SaveSession, UseSession

# Our fixed script: restore saved local storage for the document's origin.
_RESTORE_STORAGE = """origins => {
  const saved = origins[location.origin];
  if (!saved) return;
  for (const item of saved) {
    try { localStorage.setItem(item.name, item.value); } catch (e) {}
  }
}"""


def _no_store() -> FailJob:
    return FailJob("sessions are not available on this worker", kind="sessions_unavailable")


async def load_state(ctx_tenant: str, step: UseSession, store: Any) -> StorageState | None:
    """The saved state, None when absent and not required; FailJob when required."""
    try:
        state: StorageState | None = await store.load(ctx_tenant, step.name)
    except Exception as exc:
        raise RetryJob(
            f"loading session {step.name} failed: {first_line(str(exc))}",
            kind="sessions_unavailable",
        ) from None
    if state is None and step.required:
        raise FailJob(
            f"session {step.name} was never saved or has expired (save it with save_session "
            "first, or set required: false)",
            kind="session_not_found",
        )
    return state


async def save_session(step: SaveSession, ctx: RunContext) -> None:
    if ctx.sessions is None:
        raise _no_store()
    # IndexedDB too: sites that keep their login there (Playwright restores it with the
    # storage state when a later job's context opens with it).
    state = await ctx.session.context.storage_state(indexed_db=True)
    try:
        await ctx.sessions.save(ctx.tenant_id, step.name, dict(state))
    except ValueError as exc:
        raise FailJob(f"session {step.name} not saved: {exc}", kind="session_too_large") from None
    except Exception as exc:
        raise RetryJob(
            f"saving session {step.name} failed: {first_line(str(exc))}",
            kind="sessions_unavailable",
        ) from None


async def use_session(step: UseSession, ctx: RunContext, index: int | None = None) -> None:
    if index is not None and index in ctx.plan.applied_sessions:
        return  # applied when the context was created
    if ctx.sessions is None:
        raise _no_store()
    state = await load_state(ctx.tenant_id, step, ctx.sessions)
    if state is None:
        return
    context = ctx.session.context
    cookies = state.get("cookies") or []
    if cookies:
        await context.add_cookies(cookies)
    origins = {
        o["origin"]: o.get("localStorage") or []
        for o in state.get("origins") or []
        if isinstance(o, dict) and "origin" in o
    }
    if not origins:
        return
    await context.add_init_script(script=f"({_RESTORE_STORAGE})({json.dumps(origins)})")
    current = urlsplit(ctx.page.url)
    if f"{current.scheme}://{current.netloc}" in origins:
        await ctx.page.evaluate(_RESTORE_STORAGE, origins)
