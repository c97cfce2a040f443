"""What a browser session may leave behind, found and removed on every sweeper pass.

A session ends in many ways (closed, idle, max duration, lost, its worker killed, its open
failing half way). Open makes nothing but the job, and the lifecycle's final moves give back
the lease and the running slot; the worker closes the browser context and expires what was
sent and not taken. What only a killed worker leaves is its command inbox: each worker
renews its inbox's registry entry while it runs, and an inbox without a live entry (past a
grace for clocks) is a dead worker's, deleted here. The counts are what the pass found and
removed: a pass that finds none proves nothing is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from pagefleet.browsing.inbox import InboxRegistry, SessionInbox

# An inbox younger than this is not judged (its worker registers before it makes it; this
# covers the clocks of the worker and the sweeper).
INBOX_GRACE_S = 120.0


@dataclass(frozen=True)
class InboxSweep:
    inboxes: int  # inboxes seen
    # Of those, the dead workers' inboxes deleted, by name: a pass's log says which went
    # (a few a pass at most), so what a look found can be matched to the pass that took it.
    removed_names: tuple[str, ...] = ()

    @property
    def removed(self) -> int:
        return len(self.removed_names)


def sweep_inboxes(
    inbox: SessionInbox, registry: InboxRegistry, prefix: str, *, now: float
) -> InboxSweep:
    """Delete every inbox under ``prefix`` whose worker is no longer alive."""
    seen = inbox.listed(prefix)
    removed: list[str] = []
    for found in seen:
        if now - found.created_at < INBOX_GRACE_S or registry.alive(found.name, now=now):
            continue
        inbox.remove(found.name)
        removed.append(found.name)
    return InboxSweep(inboxes=len(seen), removed_names=tuple(removed))
