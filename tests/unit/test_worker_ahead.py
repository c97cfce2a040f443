"""What a worker's slot leaves for later: the hooks' work after a claim (no AWS, no browser)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from browser_task.ahead import LaterHooks
from pagefleet.jobs.hooks import Deferral
from pagefleet.jobs.models import JobMessage, JobRecord


class Recorded:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def before_claim(self, message: JobMessage) -> Deferral | None:
        self.calls.append(("before_claim", message))
        return Deferral("over the cap", 2)

    def after_claim(self, job: JobRecord) -> None:
        self.calls.append(("after_claim", job))

    def after_move(self, job: JobRecord) -> None:
        self.calls.append(("after_move", job))

    def retention_s(self, tenant_id: str) -> int | None:
        self.calls.append(("retention_s", tenant_id))
        return 60


def test_only_the_work_after_a_claim_is_left_for_later() -> None:
    hooks = Recorded()
    later: list[tuple[Any, ...]] = []

    def submit(fn: Any, *args: Any) -> Future[Any]:
        later.append((fn, *args))
        return Future()

    wrapped = LaterHooks(hooks, submit)
    message, job = object(), object()
    # The decision before a claim is still made on the spot, and its answer kept.
    assert wrapped.before_claim(message) == Deferral("over the cap", 2)  # type: ignore[arg-type]
    wrapped.after_move(job)  # type: ignore[arg-type]
    assert wrapped.retention_s("t-1") == 60
    wrapped.after_claim(job)  # type: ignore[arg-type]
    assert hooks.calls == [
        ("before_claim", message),
        ("after_move", job),
        ("retention_s", "t-1"),
    ]
    fn, arg = later.pop()
    fn(arg)
    assert hooks.calls[-1] == ("after_claim", job)


def test_a_stopped_workers_hooks_still_count_and_are_not_wrapped_twice() -> None:
    hooks = Recorded()

    def shut_down(fn: Any, *args: Any) -> Future[Any]:
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    first = LaterHooks(hooks, shut_down)
    second = LaterHooks(first, shut_down)
    assert second.hooks is hooks
    job = object()
    second.after_claim(job)  # type: ignore[arg-type]
    assert hooks.calls == [("after_claim", job)]
