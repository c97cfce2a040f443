"""The request body, settled once at the entry point, before any route sees it.

A body is JSON whatever Content-Type the client sent (``curl -d`` says form-urlencoded; other
clients say text/plain, */* or multipart without a boundary): when it parses as JSON the event
is rewritten to say ``application/json``, so the resolver reads it as such. Everything a
parser or a model could choke on is refused here with a 4xx naming the body:

- bytes that are not UTF-8 (UTF-16 with its BOM, Latin-1, binary), base64 or not;
- nesting deeper than ``MAX_JSON_DEPTH`` (the models recurse through it);
- integer literals longer than Python converts (4,300 digits), NaN, Infinity and numbers
  that overflow to infinity (not JSON; they would not serialize back);
- a body over the size limit (413).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import sys
from typing import Any

from functions.api.errors import proxy_error

# Deep enough for any workflow (paginate blocks nest at most 3 levels), far below the
# recursion limits of the JSON parser and of pydantic.
MAX_JSON_DEPTH = 64
JSON = "application/json"


class BodyRefused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.response = proxy_error(status, code, message, field="body")


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in a parsed JSON value (iteratively: no recursion)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def parse_json(text: str) -> Any:
    """Strict JSON: ValueError (with a reason) for anything json.loads would take that is not.

    The parser's own recursion guard stops absurd nesting (RecursionError, caught); the depth
    limit then keeps what the models will recurse through small.
    """
    too_deep = f"nesting is over the limit of {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError(too_deep) from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # Python's int() refuses > 4300 digits
            raise ValueError(
                f"an integer has more than {sys.get_int_max_str_digits()} digits"
            ) from None
        raise
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(too_deep)
    return value


def _body_text(event: dict[str, Any], max_bytes: int) -> str | None:
    body = event.get("body")
    if body is None or body == "":
        return None
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(str(body), validate=True)
        except (binascii.Error, ValueError):
            raise BodyRefused(400, "invalid_body", "request body is not valid base64") from None
    else:
        raw = str(body).encode("utf-8", "surrogatepass")
    if len(raw) > max_bytes:
        # Refused before parsing: a huge body must not cost validation time.
        raise BodyRefused(413, "request_too_large", f"request body exceeds {max_bytes} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bom = (
            " (it starts with a UTF-16 byte order mark)"
            if raw[:2] in (b"\xff\xfe", b"\xfe\xff")
            else ""
        )
        raise BodyRefused(
            400,
            "invalid_encoding",
            f"request body is not UTF-8 text: byte {exc.start} is invalid{bom}; send JSON as UTF-8",
        ) from None
    return text.removeprefix("\ufeff")  # a UTF-8 byte order mark is harmless: drop it


def normalise(event: dict[str, Any], *, max_bytes: int) -> dict[str, Any]:
    """The event with its body checked and decoded, and Content-Type set to JSON.

    Raises ``BodyRefused`` (carrying the proxy response) for a body that is not JSON.
    """
    text = _body_text(event, max_bytes)
    if text is None:
        return event
    if not text.strip():
        return {**event, "body": None, "isBase64Encoded": False}
    try:
        parse_json(text)
    except ValueError as exc:
        reason = str(exc).splitlines()[0][:200]
        raise BodyRefused(
            400, "invalid_json", f"request body is not valid JSON: {reason}"
        ) from None
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != "content-type"}
    multi = {
        k: v
        for k, v in (event.get("multiValueHeaders") or {}).items()
        if k.lower() != "content-type"
    }
    headers["Content-Type"] = JSON
    multi["Content-Type"] = [JSON]
    return {
        **event,
        "body": text,
        "isBase64Encoded": False,
        "headers": headers,
        "multiValueHeaders": multi,
    }
