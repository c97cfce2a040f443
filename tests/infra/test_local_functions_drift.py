"""The local stack runs each Lambda function as the synthesized template declares it:
same handler, timeout, memory and settings model (so the same PAGEFLEET_* names)."""

from __future__ import annotations

import pytest

from devstack.functions import SPECS
from pagefleet.specs.resources import FUNCTION_ENV
from pagefleet.specs.settings import env_names

from .conftest import Synth

pytestmark = [pytest.mark.infra, pytest.mark.slow]


def test_local_functions_match_the_template(synth: Synth) -> None:
    deployed = {f.get("Handler"): f for f in synth.props("AWS::Lambda::Function")}
    for spec in SPECS:
        function = deployed.get(spec.handler.replace(":", "."))
        assert function is not None, f"{spec.handler} is not in the template"
        assert function["Timeout"] == spec.timeout_s, spec.name
        assert function["MemorySize"] == spec.memory_mb, spec.name
        variables = function["Environment"]["Variables"]
        names = {n for n in variables if n.startswith("PAGEFLEET_")}
        assert names <= env_names(spec.settings_cls), spec.name
        assert variables["POWERTOOLS_SERVICE_NAME"] == spec.function_name
        assert FUNCTION_ENV.items() <= variables.items(), spec.name
