"""When a job's attempts record a Playwright trace (``options.trace``, a tenant's default).

The modes are Playwright Test's trace option's
(https://playwright.dev/docs/api/class-testoptions#test-options-trace), with a job's attempts
in the place of a test's runs. The default is the mode the configuration Playwright Test
generates for a new project sets: ``on-first-retry``. A trace costs CPU on every attempt that
records one, and the first attempt of most jobs succeeds; a failed first attempt keeps its
error, ``failure.png`` and ``failure.html``, and its retry records the trace. Only pydantic
here (infra/ reads the stage's tenant defaults).
"""

from __future__ import annotations

from typing import Literal

TraceMode = Literal[
    "off",  # never
    "on",  # every attempt, kept
    "retain-on-failure",  # every attempt, kept when it failed
    "on-first-retry",  # the second attempt only, kept
    "on-all-retries",  # every attempt after the first, kept
    "retain-on-first-failure",  # the first attempt only, kept when it failed
]
DEFAULT_TRACE: TraceMode = "on-first-retry"
