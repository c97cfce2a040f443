"""What every id looks like, in one place: the routes' path and query patterns, the models'
fields, the OpenAPI document and the MCP tools all take their id formats from here
(``tests/unit/test_ids.py`` holds the OpenAPI document to it).

Jobs, schedules, browser sessions (a browser session is a job: its id is the job's) and
audit records are ULIDs as ``new_ulid`` mints them: 26 characters,
lower case. Tenants, commands, saved logins and workflows are named by their clients,
within the characters given.
"""

from __future__ import annotations

import re
from datetime import datetime

# A ULID as minted here: 26 characters of Crockford's base32, in lower case.
ULID_CHARS = "[0-9a-z]{26}"
ULID = f"^{ULID_CHARS}$"
JOB_ID = ULID
SCHEDULE_ID = ULID
BROWSER_SESSION_ID = ULID
AUDIT_ID = ULID

TENANT_ID_CHARS = "[A-Za-z0-9_-]{1,128}"
TENANT_ID = f"^{TENANT_ID_CHARS}$"
# "tenant_id/job_id": a job named across tenants (the admin's dead-letter routes).
JOB_REF = f"^{TENANT_ID_CHARS}/{ULID_CHARS}$"
# A browser session command's id, chosen by the client (also its Idempotency-Key).
COMMAND_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$"
# Carried to the queue message's attributes and every log line: printable ASCII only.
CORRELATION_ID = r"^[A-Za-z0-9._:/+=@-]{1,128}$"

# What a client names a saved login or a workflow with (its id in the routes).
NAME_CHARS = "[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
NAME = f"^{NAME_CHARS}$"
SAVED_LOGIN_NAME = NAME
WORKFLOW_NAME = NAME

# Every id format, for the checks that nothing else defines one.
# A worker pool's name: part of its queues' keys ("<pool>-high") and its resources' ids in
# the stack, so lower case letters and digits only (pagefleet.specs.pools).
POOL_NAME = r"^[a-z][a-z0-9]{1,19}$"

PATTERNS = frozenset({ULID, TENANT_ID, JOB_REF, COMMAND_ID, CORRELATION_ID, NAME, POOL_NAME})

_ULID = re.compile(ULID)
_TENANT_ID = re.compile(TENANT_ID_CHARS)


def is_ulid(text: str) -> bool:
    """True for a job, schedule, browser session or audit id's format."""
    return _ULID.match(text) is not None


def is_tenant_id(text: str) -> bool:
    """True for a tenant id the routes take (the whole text: no trailing newline)."""
    return _TENANT_ID.fullmatch(text) is not None


def new_ulid(when: datetime | None = None) -> str:
    """A ULID in lower case: ids that sort by creation time (``when``, default now)."""
    from ulid import ULID as Ulid  # on first call: 6 ms of a cold start compiled from source

    return str(Ulid() if when is None else Ulid.from_datetime(when)).lower()


def ulid_time(text: str) -> datetime | None:
    """When the ULID ``text`` was minted; None when it only looks like one (``ULID`` admits
    letters Crockford's base32 leaves out, a first character past 7 overflows, and times
    past the year 9999 are no datetime)."""
    from ulid import ULID as Ulid

    try:
        return Ulid.from_str(text.upper()).datetime
    except (ValueError, OverflowError):
        return None
