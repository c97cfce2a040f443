"""Every step kind end to end: moto server, real Chromium, pages on 127.0.0.1.

One worker (one browser) serves the whole module; each test submits jobs to it.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import uuid
import zipfile
from collections.abc import Iterator

import boto3
import pytest

from pagefleet.errors import InvalidField
from pagefleet.jobs.models import TenantPolicy, epoch_of_iso
from pagefleet.jobs.states import JobStatus
from pagefleet.runtime import RUNTIME
from tests.support.upstream_proxy import upstream_proxy
from tests.worker.conftest import TENANT, submit, wait_for_job
from tests.worker.site_pages import all_pages, html
from tests.worker.step_stack import Stack, step_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SECRET = "hunter2-s3cret"


@pytest.fixture(scope="module")
def stack(worker_moto_endpoint: str) -> Iterator[Stack]:
    with step_stack(worker_moto_endpoint, all_pages(), secrets={"SITE_PASSWORD": SECRET}) as s:
        yield s


def test_interaction_steps_and_context_options(stack: Stack) -> None:
    site = stack.site
    done = stack.run(
        {
            "inputs": {"notes": "hello upload", "blob": base64.b64encode(b"\x00\x01\xff").decode()},
            "options": {
                "user_agent": "pagefleet-test/1.0",
                "locale": "de-DE",
                "timezone_id": "Asia/Tokyo",
                "extra_headers": {"X-Pagefleet-Test": "yes"},
                "viewport": {"width": 900, "height": 700},
            },
            "steps": [
                {"action": "goto", "url": site.url("/form")},
                {"action": "type", "selector": "#name", "text": "Ada", "delay_ms": 20},
                {"action": "press", "selector": "#name", "key": "Enter"},
                {"action": "select", "selector": "#color", "value": "g"},
                {"action": "select", "selector": "#size", "text": "Large"},
                {"action": "select", "selector": "#qty", "index": 2},
                {"action": "check", "selector": "#terms"},
                {"action": "uncheck", "selector": "#news"},
                {"action": "hover", "selector": "#menu"},
                {"action": "assert", "selector": "#tip", "visible": True},
                {
                    "action": "upload",
                    "selector": "#file",
                    "input": "notes",
                    "filename": "a.txt",
                    "content_type": "text/plain",
                },
                {
                    "action": "upload",
                    "selector": "#bin",
                    "input": "blob",
                    "filename": "b.bin",
                    "encoding": "base64",
                },
                {"action": "wait_for", "selector": "#bin-out:not(:empty)"},
                {"action": "scroll", "to_bottom": True},
                {"action": "sleep", "ms": 50},
                {"action": "scroll", "y": -200},
                {"action": "scroll", "selector": "#far"},
                {"action": "extract", "name": "keys", "selector": "#keys"},
                {"action": "extract", "name": "pressed", "selector": "#pressed"},
                {"action": "extract", "name": "file", "selector": "#file-out"},
                {"action": "extract", "name": "bin", "selector": "#bin-out"},
                {"action": "extract", "name": "env", "selector": "#env"},
            ],
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    result = done.result or {}
    assert result["keys"] == "4"  # three letters and Enter, typed key by key
    assert result["pressed"] == "enter:Ada"
    assert result["file"] == "a.txt|text/plain|hello upload"
    assert result["bin"] == "b.bin|application/octet-stream|0001ff"
    env = json.loads(result["env"])
    assert env == {"ua": "pagefleet-test/1.0", "lang": "de-DE", "tz": "Asia/Tokyo", "w": 900}
    assert site.seen_headers["/form"]["x-pagefleet-test"] == "yes"
    data = json.loads(stack.artifact(done, "data.json"))
    assert data == result
    assert stack.tags(done, "data.json") == {"retention": "routine"}


def test_select_and_check_state_is_applied(stack: Stack) -> None:
    site = stack.site
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": site.url("/form")},
                {"action": "select", "selector": "#color", "text": "Green"},
                {"action": "select", "selector": "#qty", "index": 1},
                {"action": "check", "selector": "#terms"},
                {"action": "uncheck", "selector": "#news"},
                {"action": "extract", "name": "color", "selector": "#color option:checked"},
                {"action": "extract", "name": "qty", "selector": "#qty option:checked"},
                {"action": "assert", "selector": "#terms:checked", "visible": True},
                {
                    "action": "assert",
                    "selector": "#news:checked",
                    "visible": False,
                    "timeout_ms": 500,
                },
            ],
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"color": "Green", "qty": "2"}


def test_paginated_table_gives_records_from_every_page(stack: Stack) -> None:
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/table/1")},
                {
                    "action": "paginate",
                    "next": "#next",
                    "max_pages": 5,
                    "steps": [
                        {"action": "extract", "name": "heading", "selector": "h1"},
                        {
                            "action": "extract",
                            "name": "rows",
                            "selector": "tr.row",
                            "fields": {
                                "sku": {"selector": ".sku"},
                                "name": {"selector": ".name"},
                                "href": {
                                    "selector": "a.link",
                                    "kind": "attribute",
                                    "attribute": "href",
                                },
                                "missing": {"selector": ".nope"},
                                "row": {"kind": "attribute", "attribute": "class"},
                            },
                        },
                    ],
                },
            ]
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    result = done.result or {}
    assert result["heading"] == ["Page 1", "Page 2", "Page 3"]
    rows = result["rows"]
    assert [r["sku"] for r in rows] == ["P1-1", "P1-2", "P2-1", "P2-2", "P3-1", "P3-2"]
    assert rows[0] == {
        "sku": "P1-1",
        "name": "Item 1.1",
        "href": "/item/1/1",
        "missing": None,
        "row": "row",
    }


def test_download_pdf_element_screenshot_and_requested_trace(stack: Stack) -> None:
    done = stack.run(
        {
            "options": {"trace": True},
            "steps": [
                {"action": "goto", "url": stack.site.url("/downloads")},
                {"action": "download", "selector": "#get"},
                {
                    "action": "download",
                    "selector": "#get",
                    "name": "again.csv",
                    "retention": "debug",
                },
                {"action": "pdf", "name": "page"},
                {"action": "screenshot", "name": "link", "selector": "#get", "retention": "debug"},
            ],
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    names = {a.name: a for a in done.artifacts}
    # The suggested "Q3 report (final).csv" is made safe for an artifact key.
    assert stack.artifact(done, "Q3_report_final_.csv") == b"sku,qty\nP1,3\n"
    assert names["Q3_report_final_.csv"].content_type == "text/csv"
    assert stack.tags(done, "again.csv") == {"retention": "debug"}
    assert stack.artifact(done, "page.pdf").startswith(b"%PDF")
    assert stack.artifact(done, "link.png").startswith(b"\x89PNG")
    assert stack.tags(done, "link.png") == {"retention": "debug"}
    assert stack.tags(done, "trace.zip") == {"retention": "routine"}
    assert "data.json" not in names  # nothing extracted, nothing to keep


def test_download_over_the_size_limit_fails_clearly(stack: Stack) -> None:
    big = stack.site.resources["/files/report"]
    stack.site.resources["/files/big"] = type(big)(
        b"x" * (3 * 1024 * 1024),
        content_type="application/octet-stream",
        headers={"Content-Disposition": 'attachment; filename="big.bin"'},
    )
    stack.site.resources["/big"] = type(big)(
        b'<a id="get" href="/files/big">big</a>', content_type="text/html"
    )
    done = stack.run(
        {
            "max_attempts": 1,
            "steps": [
                {"action": "goto", "url": stack.site.url("/big")},
                {"action": "download", "selector": "#get"},
            ],
        }
    )
    assert done.status is JobStatus.FAILED
    assert done.error is not None
    assert done.error.kind == "artifact_too_large"
    assert "big.bin is 3.0 MiB, over the 2.0 MiB limit" in done.error.message


def test_extract_and_click_inside_an_iframe(stack: Stack) -> None:
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/framed")},
                {"action": "wait_for", "selector": ".msg", "frame": "#inner"},
                {"action": "extract", "name": "msg", "selector": ".msg", "frame": "#inner"},
                {"action": "click", "selector": "#b", "frame": "#inner"},
                {"action": "extract", "name": "outer", "selector": "h1"},
            ]
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result == {"msg": "hello from the frame", "outer": "outer"}


def test_nested_iframes_by_a_list_of_selectors_and_typed_values(stack: Stack) -> None:
    deep = ["#outer", "#deep"]
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/nested")},
                {"action": "fill", "selector": "#q", "value": "typed by the job", "frame": deep},
                {
                    "action": "extract",
                    "name": "typed",
                    "selector": "#q",
                    "kind": "value",
                    "frame": deep,
                },
                {
                    "action": "extract",
                    "name": "attr",
                    "selector": "#q",
                    "kind": "attribute",
                    "attribute": "value",
                    "frame": deep,
                },
                {
                    "action": "extract",
                    "name": "picked",
                    "selector": "#s",
                    "kind": "value",
                    "frame": deep,
                },
                {
                    "action": "extract",
                    "name": "items",
                    "selector": "li",
                    "kind": "count",
                    "frame": deep,
                },
                {"action": "extract", "name": "none", "selector": ".absent", "kind": "count"},
            ]
        }
    )
    assert done.status is JobStatus.SUCCEEDED, done.error
    # What the user typed is the value; the attribute still holds the page's initial value.
    assert done.result == {
        "typed": "typed by the job",
        "attr": "initial",
        "picked": "b",
        "items": 3,
        "none": 0,
    }


def test_slow_page_loads_and_late_content_is_waited_for(stack: Stack) -> None:
    ok = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/slow")},
                {"action": "extract", "name": "slow", "selector": "#slow"},
                {"action": "goto", "url": stack.site.url("/late")},
                {"action": "wait_for", "selector": "#late"},
                {"action": "extract", "name": "state", "selector": "#state"},
            ]
        }
    )
    assert ok.status is JobStatus.SUCCEEDED, ok.error
    assert ok.result == {"slow": "finally", "state": "ready"}

    too_slow = stack.run(
        {
            "max_attempts": 1,
            "options": {"navigation_timeout_ms": 400},
            "steps": [{"action": "goto", "url": stack.site.url("/slow")}],
        }
    )
    assert too_slow.status is JobStatus.FAILED
    error = too_slow.error
    assert error is not None
    assert error.timeout == "navigation" and error.retryable
    assert "timed out after 400 ms loading" in error.message


def test_failed_assert_in_a_block_names_its_path_and_keeps_debug_artifacts(stack: Stack) -> None:
    done = stack.run(
        {
            "steps": [
                {"action": "goto", "url": stack.site.url("/table/1")},
                {"action": "assert", "url_matches": r"/table/\d+$"},
                {
                    "action": "paginate",
                    "next": "#next",
                    "steps": [
                        {"action": "extract", "name": "h", "selector": "h1"},
                        {"action": "assert", "text_contains": "Page 1", "timeout_ms": 300},
                    ],
                },
            ],
            # Not retried, so only a mode that keeps a first attempt's failure has a trace.
            "options": {"trace": "retain-on-failure"},
        }
    )
    assert done.status is JobStatus.FAILED
    error = done.error
    assert error is not None
    assert error.kind == "assertion_failed" and not error.retryable
    assert error.step_index == 2
    assert error.step is not None and error.step.startswith("steps[2].steps[1] assert(")
    assert "does not show 'Page 1' within 300 ms" in error.message
    assert done.result == {"h": ["Page 1", "Page 2"]}  # the partial result is kept
    names = {a.name: a.retention for a in done.artifacts}
    assert names["failure.png"] == names["failure.html"] == names["trace.zip"] == "debug"
    page_html = stack.artifact(done, "failure.html")
    assert b"Page 2" in page_html
    assert not page_html.startswith(b"<!-- pagefleet")  # page.content(), as the step failed
    with zipfile.ZipFile(io.BytesIO(stack.artifact(done, "trace.zip"))) as trace:
        members = set(trace.namelist())
    assert {"trace.trace", "trace.network"} <= members


def test_evaluate_is_refused_until_the_tenant_policy_allows_it(stack: Stack) -> None:
    request = {
        "steps": [
            {"action": "goto", "url": stack.site.url("/plain")},
            {"action": "evaluate", "expression": "document.title + ':' + (6 * 7)", "name": "v"},
        ]
    }
    # At submit: refused, naming the step (the submission policy).
    with pytest.raises(InvalidField) as refused_at_submit:
        stack.run(request)
    assert refused_at_submit.value.field == "steps[1]"
    assert "allow_evaluate" in refused_at_submit.value.message

    tenants = RUNTIME.tenant_store(stack.settings.tenants_table)
    tenants.put_policy(TENANT, TenantPolicy(allow_evaluate=True))
    try:
        allowed = stack.run(request)
        # A right taken back between submit and run holds when it runs: the worker's check.
        later = submit(stack.services, {**request, "delay_seconds": 5})
        tenants.put_policy(TENANT, TenantPolicy())
        refused = wait_for_job(stack.services, later.job_id, timeout=60)
    finally:
        tenants.put_policy(TENANT, TenantPolicy())
    assert allowed.status is JobStatus.SUCCEEDED, allowed.error
    assert allowed.result == {"v": "test:42"}
    assert refused.status is JobStatus.FAILED
    assert refused.error is not None and refused.error.kind == "evaluate_refused"
    assert refused.error.step_index == 1
    assert refused.artifacts == []  # refused before any browser work


def test_a_jobs_own_proxy_carries_its_traffic_with_credentials_from_a_secret(
    stack: Stack,
) -> None:
    boto3.client("secretsmanager").create_secret(
        Name=f"pagefleet/test/{TENANT}/PROXY_PASSWORD", SecretString="pr0xy-pass"
    )
    with upstream_proxy("fleet", "pr0xy-pass") as upstream:
        done = stack.run(
            {
                "options": {
                    "proxy": {
                        "server": upstream.url,
                        "username": "fleet",
                        "password": "{{secrets.PROXY_PASSWORD}}",
                    }
                },
                "steps": [
                    {"action": "goto", "url": stack.site.url("/plain")},
                    {"action": "extract", "name": "title", "selector": "h1"},
                ],
            }
        )
        tunnels = upstream.targets()
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert done.result and done.result["title"]
    site_port = stack.site.url("/").split(":")[2].split("/")[0]
    # The egress filter resolved and checked the target, then asked for the checked address.
    assert f"127.0.0.1:{site_port}" in tunnels
    stored = stack.services.store.get(TENANT, done.job_id).model_dump_json()
    assert "pr0xy-pass" not in stored and "{{secrets.PROXY_PASSWORD}}" in stored


def test_a_jobs_proxy_that_rejects_its_credentials_fails_the_job_once(stack: Stack) -> None:
    with upstream_proxy("fleet", "right") as upstream:
        done = stack.run(
            {
                "options": {
                    "proxy": {"server": upstream.url, "username": "fleet", "password": "wrong"}
                },
                "max_attempts": 3,
                "steps": [{"action": "goto", "url": stack.site.url("/plain")}],
            }
        )
        refused = upstream.targets(accepted=False)
    assert done.status is JobStatus.FAILED
    assert done.error is not None and done.error.kind == "proxy_auth_failed", done.error
    assert "407" in done.error.message and "username and password" in done.error.message
    assert done.attempt == 1  # wrong credentials are not retried
    assert refused


def test_the_egress_filter_still_checks_every_target_behind_a_jobs_proxy(stack: Stack) -> None:
    site = stack.site
    site.resources["/proxied-leak"] = html(
        '<body><h1 id="t">page</h1><img src="http://169.254.169.254/latest/meta-data/">'
        '<script>fetch("http://10.0.0.1/x").catch(() => {});</script></body>'
    )
    page = site.url("/proxied-leak")
    with upstream_proxy("fleet", "pw") as upstream:
        done = stack.run(
            {
                "options": {
                    "proxy": {"server": upstream.url, "username": "fleet", "password": "pw"}
                },
                "steps": [
                    {"action": "goto", "url": page},
                    {"action": "sleep", "ms": 500},
                    {"action": "extract", "name": "t", "selector": "#t"},
                ],
            }
        )
        asked = [target for target, _ in upstream.connects]
    assert done.status is JobStatus.SUCCEEDED, done.error
    # The forbidden subresources were refused by the job's listener: the proxy never saw them.
    assert asked and all(target.startswith("127.0.0.1:") for target in asked), asked


def test_a_job_stopped_on_a_page_still_loading_gives_its_slot_back_with_the_page_shown(
    stack: Stack,
) -> None:
    # The next page's site takes the connection and never answers: the watchdog stops the
    # job while its navigation waits. A person debugging needs the page the browser still
    # showed, as a picture and as HTML (the secret it echoes masked), and the slot back.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        never = f"http://127.0.0.1:{silent.getsockname()[1]}/never"
        done = stack.run(
            {
                "max_attempts": 1,
                "steps": [
                    {"action": "goto", "url": stack.site.url("/login")},
                    {"action": "fill", "selector": "#pw", "value": "{{secrets.SITE_PASSWORD}}"},
                    {"action": "goto", "url": never},
                ],
                "options": {"job_timeout_s": 2, "navigation_timeout_ms": 60_000},
            },
            timeout=90,
        )

    assert done.status is JobStatus.TIMED_OUT, done.error
    assert done.error is not None and done.error.timeout == "job"
    assert done.error.step_index == 2
    [attempt] = done.attempts
    assert attempt.finished_at is not None
    # How long past its timeout the slot was held is printed, not asserted (no wall clock in
    # a test): the page below was read from Chromium's view, which does not wait for the
    # navigation, where Playwright's screenshot and content() waited out 3 s each.
    took_s = epoch_of_iso(attempt.finished_at) - epoch_of_iso(attempt.started_at)
    print(f"\nhung page: attempt took {took_s:.2f} s with job_timeout_s=2")
    names = {a.name: a.retention for a in done.artifacts}
    assert names["failure.png"] == names["failure.html"] == "debug", names
    assert stack.artifact(done, "failure.png").startswith(b"\x89PNG\r\n\x1a\n")
    page_html = stack.artifact(done, "failure.html").decode()
    # The document still shown, marked as read while the navigation had not committed.
    assert page_html.startswith("<!-- pagefleet: the document still shown"), page_html[:300]
    assert f"navigation to {never} had not committed" in page_html.split("-->", 1)[0]
    assert 'id="login"' in page_html and "typed: ***" in page_html
    assert SECRET not in page_html


def test_login_session_is_saved_then_reused_with_the_secret_never_stored(
    stack: Stack, capfd: pytest.CaptureFixture[str]
) -> None:
    site = stack.site
    name = f"login-{uuid.uuid4().hex[:6]}"
    login = stack.run(
        {
            "steps": [
                {"action": "goto", "url": site.url("/login")},
                {"action": "fill", "selector": "#user", "value": "alice"},
                {"action": "fill", "selector": "#pw", "value": "{{secrets.SITE_PASSWORD}}"},
                {"action": "click", "selector": "#login"},
                {"action": "wait_for", "url": "**/account"},
                {"action": "save_session", "name": name},
                # The page echoes the password back: the stored result must not hold it.
                {"action": "goto", "url": site.url("/login")},
                {"action": "fill", "selector": "#pw", "value": "{{secrets.SITE_PASSWORD}}"},
                {"action": "extract", "name": "echo", "selector": "#echo"},
            ]
        }
    )
    assert login.status is JobStatus.SUCCEEDED, login.error
    assert login.result == {"echo": "typed: ***"}

    # A second job starts logged in: use_session first, so the context is created with it.
    reused = stack.run(
        {
            "steps": [
                {"action": "use_session", "name": name},
                {"action": "goto", "url": site.url("/account")},
                {"action": "extract", "name": "who", "selector": "#who"},
                {"action": "extract", "name": "theme", "selector": "#theme"},
            ]
        }
    )
    assert reused.status is JobStatus.SUCCEEDED, reused.error
    assert reused.result == {"who": "Welcome alice", "theme": "dark"}

    # A use_session later in the workflow logs the running context in.
    later = stack.run(
        {
            "steps": [
                {"action": "goto", "url": site.url("/account")},
                {"action": "extract", "name": "before", "selector": "#who"},
                {"action": "use_session", "name": name},
                {"action": "goto", "url": site.url("/account")},
                {"action": "extract", "name": "after", "selector": "#who"},
                {"action": "extract", "name": "theme", "selector": "#theme"},
            ]
        }
    )
    assert later.status is JobStatus.SUCCEEDED, later.error
    assert later.result == {"before": "Please log in", "after": "Welcome alice", "theme": "dark"}

    # The session object is encrypted at rest.
    head = boto3.client("s3").head_object(
        Bucket=stack.settings.artifacts_bucket, Key=f"{TENANT}/sessions/{name}.json"
    )
    assert head["ServerSideEncryption"] == "AES256"

    # A failing job echoes the secret in its own step: the error masks it.
    failing = stack.run(
        {
            "steps": [
                {"action": "goto", "url": site.url("/plain")},
                {
                    "action": "assert",
                    "text_contains": "{{secrets.SITE_PASSWORD}}",
                    "timeout_ms": 200,
                },
            ]
        }
    )
    assert failing.status is JobStatus.FAILED
    assert failing.error is not None and failing.error.kind == "assertion_failed"
    assert "***" in failing.error.message and "***" in (failing.error.step or "")
    # No trace for a job using secrets unless asked: a trace records filled values.
    assert "trace.zip" not in {a.name for a in failing.artifacts}

    missing = stack.run(
        {
            "steps": [
                {"action": "use_session", "name": "never-saved"},
                {"action": "goto", "url": site.url("/plain")},
            ]
        }
    )
    assert missing.status is JobStatus.FAILED
    assert missing.error is not None and missing.error.kind == "session_not_found"

    for job in (login, reused, later, failing):
        stored = stack.services.store.get(TENANT, job.job_id)
        assert SECRET not in stored.model_dump_json()
    out, err = capfd.readouterr()
    assert SECRET not in out + err


STEP_FAMILY_EXAMPLES = (
    "navigation-wait-and-scroll",
    "interaction-preferences",
    "extraction-records",
    "capture-price-list",
    "control-paginate",
    "session-login",
)


def test_step_family_examples_succeed_on_the_demo_site(stack: Stack) -> None:
    done = stack.run_examples(STEP_FAMILY_EXAMPLES)
    for name, job in done.items():
        assert job.status is JobStatus.SUCCEEDED, (name, job.error)
    assert done["interaction-preferences"].result == {
        "summary": "kettle, usd, no newsletter, terms accepted",
        "avatar": "avatar.png",
        "help": "Preferences are kept in this browser only.",
    }
    products = (done["extraction-records"].result or {})["products"]
    assert products[0] == {
        "sku": "PF-001",
        "name": "Storm lantern",
        "price": "€24.90",
        "link": "/products/lantern.html",
    }
    items = (done["control-paginate"].result or {})["items"]
    assert [i["sku"] for i in items] == [f"PF-00{n}" for n in range(1, 9)]
    captured = {a.name for a in done["capture-price-list"].artifacts}
    assert {"price-list.png", "price-list.pdf", "price-list.csv", "trace.zip"} <= captured
    assert (done["session-login"].result or {}) == {"greeting": "Signed in as demo-user"}
