"""SnapStart on the API and the authorizer: a published version, an alias, API Gateway on it."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.infra, pytest.mark.slow]

SNAPSTART_HANDLERS = ("functions.api.handler.handler", "functions.authorizer.handler.handler")


def _function_ids(synth: Any) -> dict[str, str]:
    """Handler -> logical id of its AWS::Lambda::Function."""
    return {
        r["Properties"]["Handler"]: logical_id
        for logical_id, r in synth.resources("AWS::Lambda::Function").items()
        if "Handler" in r.get("Properties", {})
    }


def _alias_of(synth: Any, function_id: str) -> tuple[str, dict[str, Any]]:
    aliases = [
        (logical_id, r["Properties"])
        for logical_id, r in synth.resources("AWS::Lambda::Alias").items()
        if r["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    assert len(aliases) == 1, f"{function_id}: {aliases}"
    return aliases[0]


def test_api_and_authorizer_snapshot_published_versions(synth: Any) -> None:
    functions = synth.resources("AWS::Lambda::Function")
    for handler, function_id in _function_ids(synth).items():
        snap = functions[function_id]["Properties"].get("SnapStart")
        if handler in SNAPSTART_HANDLERS:
            assert snap == {"ApplyOn": "PublishedVersions"}, handler
        else:  # event-driven functions keep on-demand init: no alias to route through
            assert snap is None, handler


def test_each_snapstart_function_has_a_live_alias_on_its_published_version(synth: Any) -> None:
    versions = synth.resources("AWS::Lambda::Version")
    ids = _function_ids(synth)
    for handler in SNAPSTART_HANDLERS:
        _, alias = _alias_of(synth, ids[handler])
        assert alias["Name"] == "live"
        version_id = alias["FunctionVersion"]["Fn::GetAtt"][0]
        assert versions[version_id]["Properties"]["FunctionName"] == {"Ref": ids[handler]}


def test_api_gateway_invokes_the_aliases_not_latest(synth: Any) -> None:
    ids = _function_ids(synth)
    api_alias, _ = _alias_of(synth, ids["functions.api.handler.handler"])
    auth_alias, _ = _alias_of(synth, ids["functions.authorizer.handler.handler"])
    proxy_uris = [
        str(m["Integration"]["Uri"])
        for m in synth.props("AWS::ApiGateway::Method")
        if m.get("Integration", {}).get("Type") == "AWS_PROXY"
    ]
    assert proxy_uris and all(api_alias in uri for uri in proxy_uris)
    (authorizer,) = synth.props("AWS::ApiGateway::Authorizer")
    assert auth_alias in str(authorizer["AuthorizerUri"])
    # API Gateway may invoke each alias (the permission names the alias, not the function).
    allowed = [str(p["FunctionName"]) for p in synth.props("AWS::Lambda::Permission")]
    assert any(api_alias in f for f in allowed)
    assert any(auth_alias in f for f in allowed)
    assert not any(
        f == str({"Fn::GetAtt": [ids["functions.api.handler.handler"], "Arn"]}) for f in allowed
    )
