"""Settings go to child processes and to the CDK app as environment variables
(``pagefleet.specs.settings.to_env``): what is rendered must read back as it was."""

from __future__ import annotations

import pytest

from devstack.local_settings import LOCAL_POOLS
from pagefleet.specs.resources import queues_of
from pagefleet.specs.settings import ApiSettings, CoreSettings, WorkerSettings, to_env

STORES = {
    "jobs_table": "jobs",
    "tenants_table": "tenants",
    "artifacts_bucket": "artifacts",
    "queue_urls": {
        spec.key: f"http://127.0.0.1:9/{spec.key}" for spec in queues_of(("standard", "heavy"))
    },
}


@pytest.mark.parametrize("model", [CoreSettings, ApiSettings, WorkerSettings])
def test_every_field_reads_back_from_its_environment_variable(
    model: type[CoreSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pools (a tuple of models) once rendered as a Python repr that no process could
    # read: the local stack did not start.
    given = model(**STORES, pools=LOCAL_POOLS)
    for name, value in to_env(given).items():
        monkeypatch.setenv(name, value)
    assert model() == given
