"""A HAR is rewritten before it is kept: credentials' headers and cookies, and every form of
the job's secrets, in the log and in the body files (browser_task.browser.har)."""

from __future__ import annotations

import base64
import io
import json
import zipfile

from browser_task.browser.har import redact
from pagefleet.workflow.masking import Masker, encoded_forms

SECRET = "s3cr&t é"


def _zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def _entry(url: str) -> dict[str, object]:
    return {
        "request": {
            "url": url,
            "headers": [
                {"name": "Authorization", "value": "Bearer plain-token"},
                {"name": "Cookie", "value": "sid=abc"},
                {"name": "Accept", "value": "*/*"},
            ],
            "cookies": [{"name": "sid", "value": "abc"}],
            "postData": {"text": "user=ada&password=s3cr%26t+%C3%A9"},
        },
        "response": {
            "headers": [{"name": "set-cookie", "value": "sid=new; HttpOnly"}],
            "cookies": [{"name": "sid", "value": "new"}],
            "content": {"encoding": "base64", "text": base64.b64encode(SECRET.encode()).decode()},
        },
    }


def test_credentials_and_every_form_of_a_secret_are_gone_from_log_and_bodies() -> None:
    log = {"log": {"entries": [_entry("https://shop.test/login?q=s3cr%26t%20%C3%A9")]}}
    body = f"<p>hello {SECRET}</p>".encode("cp1252")
    recorded = _zip({"har.har": json.dumps(log).encode(), "a1b2.html": body})
    kept = redact(recorded, Masker.of([SECRET]))
    with zipfile.ZipFile(io.BytesIO(kept)) as archive:
        texts = {n: archive.read(n) for n in archive.namelist()}
    entry = json.loads(texts["har.har"])["log"]["entries"][0]
    request, response = entry["request"], entry["response"]
    assert [h["value"] for h in request["headers"]] == ["***", "***", "*/*"]
    assert request["cookies"][0]["value"] == "***" and response["cookies"][0]["value"] == "***"
    assert response["headers"][0]["value"] == "***"
    assert request["url"] == "https://shop.test/login?q=***"
    assert request["postData"]["text"] == "user=ada&password=***"
    assert base64.b64decode(response["content"]["text"]) == b"***"
    assert texts["a1b2.html"] == b"<p>hello ***</p>"
    everything = b"".join(texts.values())
    for form in encoded_forms(SECRET):
        for charset in ("utf-8", "cp1252"):
            try:
                assert form.encode(charset) not in everything, form
            except UnicodeEncodeError:
                continue


def test_without_secrets_only_the_credentials_change() -> None:
    log = {"log": {"entries": [_entry("https://shop.test/")]}}
    kept = redact(_zip({"har.har": json.dumps(log).encode(), "b.txt": b"body"}), Masker())
    with zipfile.ZipFile(io.BytesIO(kept)) as archive:
        assert archive.read("b.txt") == b"body"
        entry = json.loads(archive.read("har.har"))["log"]["entries"][0]
    assert entry["request"]["postData"]["text"] == "user=ada&password=s3cr%26t+%C3%A9"
    assert entry["request"]["headers"][0]["value"] == "***"
