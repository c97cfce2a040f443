"""What every Lambda function's environment carries (``pagefleet.specs.resources.FUNCTION_ENV``)."""

from __future__ import annotations

from importlib.metadata import entry_points

from devstack.functions import SPECS, function_env
from pagefleet.specs.resources import FUNCTION_ENV


def test_no_pydantic_plugin_is_installed() -> None:
    # FUNCTION_ENV turns pydantic's plugins off (a cold start does not look for them): a
    # dependency that ships one (e.g. logfire) would be silently disabled in the functions.
    assert FUNCTION_ENV["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
    assert list(entry_points(group="pydantic")) == []


SETTINGS = {
    "jobs_table": "jobs",
    "tenants_table": "tenants",
    "connections_table": "connections",
    "artifacts_bucket": "artifacts",
    "queue_urls": {"standard": "http://127.0.0.1:1/q"},
    "queue_url": "http://127.0.0.1:1/q",
    "live_endpoint": "http://127.0.0.1:1",
}


def test_local_functions_run_with_the_deployed_function_env() -> None:
    for spec in SPECS:
        env = function_env(spec, SETTINGS, {"AWS_REGION": "us-east-1"})
        assert FUNCTION_ENV.items() <= env.items(), spec.name
