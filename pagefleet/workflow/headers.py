"""HTTP header fields as Chromium takes them from a job: the extra headers of its requests
(``options.extra_headers``) and the headers a ``route`` step answers with (``fulfill``).

Measured with the worker's Chromium (156) through Playwright: a name that is not a token or
a value holding NUL, CR or LF fails a context's ``new_page`` as an extra header and leaves a
fulfilled request unanswered (the page waits until its step times out); as an extra header,
the fields the browser writes itself fail every request (``net::ERR_INVALID_ARGUMENT``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, ValidationInfo

from pagefleet.specs.stored import stored

# A name is an RFC 9110 token (https://www.rfc-editor.org/rfc/rfc9110#section-5.6.2).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# What ends a header line: Chromium refuses a value (or a User-Agent) holding one.
LINE_BREAKING = re.compile(r"[\x00\r\n]")
# Chromium fails every request that carries one of these as an extra header (its network
# stack writes them itself), and any ``Proxy-`` one.
_CHROMIUM_WRITES = frozenset(
    {
        "connection",
        "content-length",
        "cookie2",
        "host",
        "keep-alive",
        "set-cookie",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)


def field_problem(name: str, value: str) -> str | None:
    """Why Chromium would refuse this header field anywhere (request or response), or None."""
    if not _TOKEN.fullmatch(name):
        return f"header name {name!r} is not a token (letters, digits and !#$%&'*+-.^_`|~)"
    if LINE_BREAKING.search(value):
        return f"header {name}'s value holds a NUL, CR or LF character"
    return None


def request_header_problem(name: str, value: str) -> str | None:
    """Why Chromium would refuse this extra request header (or fail every request with it)."""
    problem = field_problem(name, value)
    if problem is not None:
        return problem
    lower = name.lower()
    if lower.startswith("proxy-"):
        return f"header {name} is refused by Chromium (a proxy's credentials go in options.proxy)"
    if lower in _CHROMIUM_WRITES:
        return f"header {name} is refused by Chromium (the browser writes it itself)"
    return None


def headers_problem(headers: dict[str, str], *, request: bool) -> str | None:
    """The first problem of a header map: a field's, or a name given twice in two cases
    (names are case-insensitive: which one Chromium keeps is not said)."""
    seen: dict[str, str] = {}
    for name, value in headers.items():
        problem = (request_header_problem if request else field_problem)(name, value)
        if problem is not None:
            return problem
        if name.lower() in seen:
            return (
                f"header {name} is given twice ({seen[name.lower()]} and {name}): "
                "names are case-insensitive"
            )
        seen[name.lower()] = name
    return None


def _checked(*, request: bool) -> Callable[[dict[str, str], ValidationInfo], dict[str, str]]:
    def check(headers: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        problem = None if stored(info) else headers_problem(headers, request=request)
        if problem is not None:
            raise ValueError(problem)
        return headers

    return check


# Extra headers of a job's requests; the headers a route step answers with. A record's
# are read as written (``STORED``).
RequestHeaders = Annotated[dict[str, str], AfterValidator(_checked(request=True))]
ResponseHeaders = Annotated[dict[str, str], AfterValidator(_checked(request=False))]
