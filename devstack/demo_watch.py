"""The demo site's watched shop: ``/watch/``, whose prices and stock change between runs.

``examples/monitors`` watches it. The page is rendered from a catalogue held in memory and
changed through a control endpoint on the same loopback server (``/watch/state``): GET it,
PUT a new one (``{"products": [...], "button_left": 24}``), POST ``/watch/reset`` for the
starting catalogue. The page also shows a clock (different on every visit: what a monitor's
``mask`` is for) and a button whose position the state sets (a layout change a screenshot
comparison sees).
"""

from __future__ import annotations

import copy
import html
import json
import threading
import time
from typing import Any

PAGE_PATH = "/watch/"
STATE_PATH = "/watch/state"
RESET_PATH = "/watch/reset"
MAX_STATE_BYTES = 64 * 1024

START: dict[str, Any] = {
    "products": [
        {"sku": "KET-1", "name": "Camp kettle", "price": "24.00", "stock": 12},
        {"sku": "LAN-2", "name": "Storm lantern", "price": "18.50", "stock": 4},
        {"sku": "TRP-3", "name": "Tarp 3x3", "price": "39.90", "stock": 0},
    ],
    "button_left": 24,
}

_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Price watch</title><link rel="stylesheet" href="/style.css">
<style>
  .watch-clock {{ display: inline-block; width: 12rem; background: #fff3c4; padding: .2rem; }}
  .watch-buy {{ position: relative; left: {left}px; width: 10rem; height: 3rem;
                background: #1565c0; color: #fff; border: 0; }}
</style></head>
<body>
  <header><h1>Price watch</h1>
    <p>As of <time id="clock" class="watch-clock">{clock}</time></p></header>
  <main>
    <ul id="products">{rows}</ul>
    <p id="empty">{empty}</p>
    <button type="button" id="buy" class="watch-buy">Buy</button>
  </main>
</body>
</html>
"""
_ROW = (
    '<li class="product" data-sku="{sku}"><span class="name">{name}</span>'
    '<span class="price">{price}</span><span class="stock">{stock}</span></li>'
)


class WatchedShop:
    """The catalogue the page shows, changed by PUT /watch/state (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = copy.deepcopy(START)

    def state(self) -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self._state)

    def replace(self, body: bytes) -> str | None:
        """Take a new state; why it was refused, or None."""
        try:
            state = json.loads(body)
        except ValueError:
            return "the body is not JSON"
        problem = _problem(state)
        if problem is None:
            with self._lock:
                self._state = {"button_left": START["button_left"], **state}
        return problem

    def reset(self) -> None:
        with self._lock:
            self._state = copy.deepcopy(START)

    def page(self) -> bytes:
        state = self.state()
        rows = "".join(
            _ROW.format(
                sku=html.escape(str(p["sku"])),
                name=html.escape(str(p["name"])),
                price=html.escape(str(p["price"])),
                stock=html.escape(f"{p['stock']} in stock" if p["stock"] else "out of stock"),
            )
            for p in state["products"]
        )
        return _PAGE.format(
            left=int(state["button_left"]),
            clock=time.strftime("%H:%M:%S") + f".{int(time.time() * 1000) % 1000:03d}",
            rows=rows,
            empty="" if state["products"] else "Nothing to show right now.",
        ).encode()


def _problem(state: Any) -> str | None:
    if not isinstance(state, dict) or not isinstance(state.get("products"), list):
        return 'expected {"products": [...], "button_left": N}'
    for product in state["products"]:
        if not isinstance(product, dict) or not {"sku", "name", "price", "stock"} <= set(product):
            return "each product needs sku, name, price and stock"
    if not isinstance(state.get("button_left", 0), int):
        return "button_left is a number of pixels"
    return None
