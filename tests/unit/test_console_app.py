"""The local gateway's console app: files under /console/, the generated config, the
security headers on every answer, and nothing outside the console's directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devstack.console_app import ConsoleApp, local_console
from devstack.gateway.events import HttpRequest
from pagefleet.specs.console_site import SiteConfig, content_security_policy


def get(app: ConsoleApp, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    answer = app.handle(HttpRequest(method=method, raw_path=path, headers=[], body=b""))
    return answer.status, dict(answer.headers), answer.body


@pytest.fixture
def app(tmp_path: Path) -> ConsoleApp:
    root = tmp_path / "console"
    (root / "views").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html><title>console</title>")
    (root / "views" / "jobs.js").write_text("export const x = 1;")
    (tmp_path / "secret.txt").write_text("not for the web")
    config = SiteConfig(api_base="/v1", websocket_url="ws://127.0.0.1:9/live", stage="local")
    return ConsoleApp(
        lambda: config,
        image_origins=("http://127.0.0.1:7",),
        connect_origins=("ws://127.0.0.1:9",),
        root=root,
    )


def test_index_and_modules_are_served_with_their_types(app: ConsoleApp) -> None:
    status, headers, body = get(app, "/console/")
    assert (status, headers["Content-Type"]) == (200, "text/html")
    assert b"<title>console</title>" in body
    status, headers, _ = get(app, "/console/views/jobs.js?v=2")
    assert (status, headers["Content-Type"]) == (200, "text/javascript")


def test_config_names_the_api_base_and_the_live_url(app: ConsoleApp) -> None:
    status, _, body = get(app, "/console/config.json")
    assert status == 200
    assert json.loads(body) == {
        "api_base": "/v1",
        "websocket_url": "ws://127.0.0.1:9/live",
        "stage": "local",
    }


def test_every_answer_has_the_strict_policy_and_headers(app: ConsoleApp) -> None:
    for path in ("/console/", "/console/missing.js", "/console"):
        _, headers, _ = get(app, path)
        policy = headers["Content-Security-Policy"]
        assert "script-src 'self';" in policy and "'unsafe-inline'" not in policy
        assert "img-src 'self' data: http://127.0.0.1:7" in policy
        assert "connect-src 'self' ws://127.0.0.1:9" in policy
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    "path",
    ["/console/../secret.txt", "/console/%2e%2e/secret.txt", "/console/views/../../secret.txt"],
)
def test_nothing_outside_the_console_directory_is_served(app: ConsoleApp, path: str) -> None:
    status, _, body = get(app, path)
    assert status == 404
    assert b"not for the web" not in body


def test_the_bare_path_redirects_and_writes_are_refused(app: ConsoleApp) -> None:
    for path in ("/console", "/"):
        status, headers, _ = get(app, path)
        assert (status, headers["Location"]) == (301, "/console/")
    assert get(app, "/console/index.html", method="POST")[0] == 405


def test_the_console_claims_only_its_own_paths(app: ConsoleApp) -> None:
    def claims(path: str) -> bool:
        return app.matches(HttpRequest(method="GET", raw_path=path, headers=[], body=b""))

    assert claims("/console/") and claims("/console") and claims("/console/app.js")
    assert claims("/")  # the root leads to the console, as on CloudFront
    assert not claims("/v1/jobs") and not claims("/consoles") and not claims("/v1")


def test_the_local_console_serves_the_repositorys_files() -> None:
    app = local_console("ws://127.0.0.1:9/live", "http://127.0.0.1:7")
    status, _, body = get(app, "/console/")
    assert status == 200 and b'src="./app.js"' in body
    assert get(app, "/console/app.js")[0] == 200


def test_the_policy_allows_no_inline_code_or_framing() -> None:
    policy = content_security_policy()
    assert "default-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
    assert "unsafe" not in policy
