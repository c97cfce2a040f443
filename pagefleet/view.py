"""The one base of the API's response bodies (the contract's in ``pagefleet.api``, the tenancy
routes' in ``pagefleet.tenancy.views``, the browser sessions' beside their service).

Bodies read with ``extra="ignore"``: a client keeps working when a newer API adds a field.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class View(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
