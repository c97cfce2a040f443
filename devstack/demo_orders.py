"""The demo shop's order desk: a server that records each order by the reference the form
carries, and can be told to answer slowly or to drop its answer after recording.

It is what makes "exactly once" testable (docs/irreversible-steps.md): an order placed
twice shows as two orders with the same reference. Pages (under ``/shop``):

- ``GET  /shop/order.html``         the form (static, examples/site/shop/order.html)
- ``POST /shop/orders``             place an order: recorded first, then answered (or not)
- ``GET  /shop/orders?reference=R`` the account's orders with reference R (what a check
  reads), each with a "Cancel order" button
- ``POST /shop/orders/<n>/cancel``  cancel order n (what a compensation does)
- ``GET  /shop/orders.json``        every order, for tests and benchmarks
- ``GET|POST /shop/control``        how the desk answers: ``slow_s``, ``drop``,
  ``drop_rate``, ``dedupe``
"""

from __future__ import annotations

import html
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

ORDER_PATH = "/shop/orders"
CONTROL_PATH = "/shop/control"
MAX_REFERENCE = 200

_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{title}</title><link rel="stylesheet" href="/style.css"></head>
<body>
  <header><h1>{title}</h1>
    <nav><a href="/">Products</a> <a href="/shop/order.html">Order</a></nav></header>
  <main>{body}</main>
</body>
</html>
"""


@dataclass
class Order:
    number: str
    reference: str
    item: str
    quantity: int
    at: float
    cancelled: bool = False


@dataclass
class Behaviour:
    """How the desk answers an order it recorded."""

    slow_s: float = 0.0  # answer this long after recording
    drop: bool = False  # record, then close the connection without an answer
    drop_rate: float = 0.0  # ... for this share of the orders, at random
    # Refuse a second order with a reference already used (the site's own duplicate
    # detection); off by default, so that a platform that doubles an order is caught.
    dedupe: bool = False


@dataclass
class Orders:
    """The orders recorded so far, and how the next one is answered (thread-safe)."""

    behaviour: Behaviour = field(default_factory=Behaviour)
    # Called with each order as it is recorded, before it is answered (chaos tests kill the
    # worker placing it right then).
    on_order: Callable[[Order], None] | None = None
    _orders: list[Order] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: threading.Event = field(default_factory=threading.Event)
    _random: random.Random = field(default_factory=lambda: random.Random(24))

    def all(self) -> list[Order]:
        with self._lock:
            return list(self._orders)

    def of(self, reference: str) -> list[Order]:
        return [o for o in self.all() if o.reference == reference]

    def by_reference(self) -> dict[str, int]:
        """How many orders each reference has."""
        counts: dict[str, int] = {}
        for order in self.all():
            counts[order.reference] = counts.get(order.reference, 0) + 1
        return counts

    def set(self, **changes: Any) -> Behaviour:
        with self._lock:
            self.behaviour = Behaviour(**{**asdict(self.behaviour), **changes})
            return self.behaviour

    def reset(self) -> None:
        with self._lock:
            self._orders.clear()
            self.behaviour = Behaviour()

    def stop(self) -> None:
        self._stopped.set()  # a slow answer under way ends now

    def place(self, reference: str, item: str, quantity: int) -> tuple[Order, bool, Behaviour]:
        """Record an order; (the order, whether it is new, how to answer it)."""
        with self._lock:
            behaviour = self.behaviour
            if behaviour.dedupe:
                for order in self._orders:
                    if order.reference == reference:
                        return order, False, behaviour
            order = Order(
                number=f"ORD-{len(self._orders) + 1:06d}",
                reference=reference,
                item=item,
                quantity=quantity,
                at=time.time(),
            )
            self._orders.append(order)
            if not behaviour.drop and self._random.random() < behaviour.drop_rate:
                behaviour = Behaviour(**{**asdict(behaviour), "drop": True})
        hook = self.on_order
        if hook is not None:
            hook(order)
        return order, True, behaviour

    def cancel(self, number: str) -> Order | None:
        with self._lock:
            for order in self._orders:
                if order.number == number:
                    order.cancelled = True
                    return order
        return None

    def wait(self, seconds: float) -> None:
        self._stopped.wait(seconds)


@dataclass(frozen=True)
class Answer:
    """What the handler sends: a status and a body, or nothing at all (``drop``)."""

    status: int = 200
    body: str = ""
    content_type: str = "text/html; charset=utf-8"
    drop: bool = False


def handle_get(orders: Orders, path: str, query: dict[str, list[str]]) -> Answer | None:
    """A GET under /shop this desk answers (None: not one of its pages)."""
    if path == ORDER_PATH + ".json":
        listed = [asdict(o) for o in orders.all()]
        return Answer(body=json.dumps(listed), content_type="application/json")
    if path == CONTROL_PATH:
        return Answer(body=json.dumps(asdict(orders.behaviour)), content_type="application/json")
    if path != ORDER_PATH:
        return None
    reference = query.get("reference", [""])[0]
    found = orders.of(reference)
    if not found:
        body = (
            f'<p id="no-orders">No order with reference <code>{html.escape(reference)}</code>.</p>'
        )
        return Answer(body=_PAGE.format(title="Your orders", body=body))
    return Answer(body=_PAGE.format(title="Your orders", body=_order_list(found)))


def handle_post(orders: Orders, path: str, form: dict[str, list[str]], raw: bytes) -> Answer | None:
    """A POST under /shop this desk answers (None: not one of its pages)."""
    if path == ORDER_PATH:
        return _place(orders, form)
    if path == CONTROL_PATH:
        try:
            changes = json.loads(raw or b"{}")
            known = ("slow_s", "drop", "drop_rate", "dedupe")
            behaviour = orders.set(**{k: changes[k] for k in known if k in changes})
        except (ValueError, TypeError) as exc:
            return Answer(400, json.dumps({"error": str(exc)}), "application/json")
        return Answer(body=json.dumps(asdict(behaviour)), content_type="application/json")
    if path.startswith(ORDER_PATH + "/") and path.endswith("/cancel"):
        number = path[len(ORDER_PATH) + 1 : -len("/cancel")]
        order = orders.cancel(number)
        if order is None:
            return Answer(404, _PAGE.format(title="Not found", body="<p>No such order.</p>"))
        body = (
            f'<p id="cancelled">Order <span class="order-number">{order.number}</span> '
            "is cancelled.</p>"
        )
        return Answer(body=_PAGE.format(title="Order cancelled", body=body))
    return None


def _place(orders: Orders, form: dict[str, list[str]]) -> Answer:
    reference = form.get("reference", [""])[0].strip()
    item = form.get("item", [""])[0].strip()
    try:
        quantity = int(form.get("quantity", ["1"])[0])
    except ValueError:
        quantity = 0
    if not reference or len(reference) > MAX_REFERENCE or not item or not 1 <= quantity <= 99:
        body = "<p id='order-error'>An order needs an item, a quantity (1-99) and a reference.</p>"
        return Answer(400, _PAGE.format(title="Order refused", body=body))
    order, new, behaviour = orders.place(reference, item, quantity)
    if behaviour.slow_s:
        orders.wait(behaviour.slow_s)
    if behaviour.drop:
        return Answer(drop=True)
    title = "Order placed" if new else "Order already placed"
    body = '<div id="confirmation">' + _order_list([order]) + "</div>"
    return Answer(body=_PAGE.format(title=title, body=body))


def _order_list(found: list[Order]) -> str:
    rows = []
    for order in found:
        state = "cancelled" if order.cancelled else "placed"
        rows.append(
            f'<li class="order" data-state="{state}">'
            f'<span class="order-number">{order.number}</span> '
            f'<span class="order-item">{html.escape(order.item)}</span> x{order.quantity} '
            f'(reference <code class="order-reference">{html.escape(order.reference)}</code>, '
            f'<span class="order-state">{state}</span>)'
            f'<form method="post" action="{ORDER_PATH}/{order.number}/cancel">'
            '<button type="submit" class="cancel-order">Cancel order</button></form></li>'
        )
    first = found[0]
    return (
        f'<p>Order number <strong id="order-number">{first.number}</strong></p>'
        f'<ul id="orders">{"".join(rows)}</ul>'
    )
