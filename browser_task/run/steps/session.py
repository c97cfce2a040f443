"""save_session and use_session: Playwright storage state kept per tenant (see sessions.py).

A session holds cookies, local storage and IndexedDB (sites that keep their login there). A
leading use_session is applied when the context is created (``storage_state``), which is
the only way Playwright restores storage for every origin before the first page loads. A
use_session later in the workflow (or in a browser session) restores it into the live
context: the saved state merged over the context's own (later wins for the same cookie or
origin, as for several leading ones) is set with Playwright's ``set_storage_state``. That
rewrites each origin's IndexedDB, which a page holding one of its databases open would block
(a database is only deleted once every connection to it closes): such a page is parked on
about:blank meanwhile and then loaded again, so it reads the restored login; a page that
asks before it is left (beforeunload) is answered as any dialog is (a dialog step, else
options.dialogs), and dismissed it fails the step, saying so.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError

from browser_task.errors import FailJob, RetryJob, first_line
from browser_task.run.context import RunContext
from browser_task.tenant.logins import StorageState
from pagefleet.workflow import SaveSession, UseSession


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
    # IndexedDB too: sites that keep their login there.
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
    await restore_live(ctx.session.context, state)


async def restore_live(context: Any, saved: StorageState) -> None:
    """``saved`` merged into a live context: cookies, local storage and IndexedDB."""
    merged = merge_states(await context.storage_state(indexed_db=True), saved)
    databases = {o.get("origin") for o in merged["origins"] if o.get("indexedDB")}
    parked: list[tuple[Any, str]] = []
    try:
        for page in context.pages:
            url = page.url
            if _origin(url) not in databases:
                continue
            try:
                await page.goto("about:blank")
            except PlaywrightError:
                raise FailJob(
                    f"use_session loads {url} again to restore its IndexedDB, and the page "
                    "would not be left (its beforeunload dialog was dismissed): put a dialog "
                    'step with "type": "beforeunload" before use_session, or set '
                    "options.dialogs to accept",
                    kind="step_failed",
                ) from None
            parked.append((page, url))
        await context.set_storage_state(merged)
    finally:
        for page, url in parked:
            await page.goto(url)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def merge_states(base: StorageState | None, extra: StorageState) -> StorageState:
    """Several sessions in one context: later ones win for the same cookie / origin (an
    origin whole: its local storage and IndexedDB go together)."""
    if base is None:
        return {
            "cookies": list(extra.get("cookies") or []),
            "origins": list(extra.get("origins") or []),
        }
    cookies = {(c.get("name"), c.get("domain"), c.get("path")): c for c in base["cookies"]}
    cookies.update(
        {(c.get("name"), c.get("domain"), c.get("path")): c for c in extra.get("cookies") or []}
    )
    origins = {o.get("origin"): o for o in base["origins"]}
    origins.update({o.get("origin"): o for o in extra.get("origins") or []})
    return {"cookies": list(cookies.values()), "origins": list(origins.values())}
