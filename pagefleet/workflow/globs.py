"""Playwright's URL glob syntax (``wait_for.url``, a ``route`` step's ``url``,
``options.block.urls``), checked when a job is made.

Playwright refuses a glob whose ``{...}`` group is nested or unmatched (``Invalid glob
pattern``) only when the worker hands it over, after a claim and a context; these are its
rules (a backslash escapes the next character), so the API answers them with a 422.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, ValidationInfo

from pagefleet.specs.stored import stored
from pagefleet.workflow.templating import literal_part


def glob_problem(glob: str) -> str | None:
    """Why Playwright would refuse ``glob`` (its ``{{...}}`` references aside: what they
    bring is checked in the worker), or None."""
    return _problem(literal_part(glob), glob)


def _problem(literal: str, glob: str) -> str | None:
    in_group = False
    i = 0
    while i < len(literal):
        c = literal[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            if in_group:
                return f"the URL glob {glob!r} nests a {{...}} group, which globs do not allow"
            in_group = True
        elif c == "}":
            if not in_group:
                return f"the URL glob {glob!r} has a '}}' that no '{{' opened"
            in_group = False
        i += 1
    return f"the URL glob {glob!r} has a '{{' that no '}}' closes" if in_group else None


def checked_glob(glob: str, info: ValidationInfo) -> str:
    """A field's glob, refused (``ValueError``) if Playwright would refuse it; a record's
    read as written."""
    problem = None if stored(info) else glob_problem(glob)
    if problem is not None:
        raise ValueError(problem)
    return glob


# A step's URL glob, checked as Playwright reads it.
UrlGlob = Annotated[str, AfterValidator(checked_glob)]
