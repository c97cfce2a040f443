"""A stream batch's notifications handed on once each, whatever the stream redelivers.

Each notification has a mark (``pagefleet.notify.ports.Mark``). For a batch: one read of
all their marks, the unmarked ones handed on together (EventBridge, the webhook queue), and
one write of the marks of those that were accepted. A notification is marked only once
accepted; if any was not, the batch fails after the others are marked, so the stream hands
it again and only the refused ones go out again. Marked and not accepted cannot both be
true; accepted and not marked can (the mark's write failed): that one goes out twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from pagefleet.notify.ports import Deliveries, Mark

T = TypeVar("T")


def hand_on_once(
    deliveries: Deliveries,
    notices: Sequence[tuple[Mark, T]],
    hand_on: Callable[[list[T]], list[str | None]],
    what: str,
) -> None:
    """Hand on (``hand_on``: per notice None, or why it was refused) the ``notices`` not
    yet marked, in order, and mark those accepted; raises if any was refused."""
    first: dict[Mark, T] = {}
    for mark, notice in notices:
        first.setdefault(mark, notice)  # a batch that names a mark twice hands it on once
    if not first:
        return
    done = deliveries.marked_many(list(first))
    todo = [(mark, notice) for mark, notice in first.items() if mark not in done]
    if not todo:
        return
    told = hand_on([notice for _, notice in todo])
    deliveries.mark_many([m for (m, _), t in zip(todo, told, strict=True) if t is None])
    refused = [t for t in told if t is not None]
    if refused:
        raise RuntimeError(f"{len(refused)} of {len(todo)} {what} were refused: {refused[0]}")
