"""Steps that keep a login: save_session, use_session.

The session is Playwright's storage state (cookies, local storage and IndexedDB), stored
encrypted in S3 under the tenant, so a later job can start logged in.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pagefleet import ids
from pagefleet.workflow.steps.base import StepBase

SESSION_NAME = Field(min_length=1, max_length=100, pattern=ids.SAVED_LOGIN_NAME)


class SaveSession(StepBase):
    """Save this context's login (cookies, local storage, IndexedDB), encrypted per tenant."""

    action: Literal["save_session"] = "save_session"
    name: str = SESSION_NAME


class UseSession(StepBase):
    """Load a saved login into this job's browser context (cookies, storage, IndexedDB)."""

    action: Literal["use_session"] = "use_session"
    name: str = SESSION_NAME
    # When false, a missing session is not an error: the job continues logged out.
    required: bool = True
