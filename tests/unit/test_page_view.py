"""Reading a failed job's page without waiting (browser_task.browser.page_view): the main
document out of Chromium's MHTML snapshot, and when the main frame has a navigation in
flight. Archives shaped as Blink writes them (Chromium 14x, Page.captureSnapshot)."""

from __future__ import annotations

import base64
import quopri
from collections.abc import Callable
from typing import Any

from playwright.async_api import Error as PlaywrightError

from browser_task.browser.page_view import NavigationWatch, main_document

BOUNDARY = "----MultipartBoundary--EcLFds8WNiVxE3nrUey3hPQr5vE1qoOvEePfGdmsyd----"


def archive(*parts: tuple[str, str, bytes]) -> str:
    """An MHTML archive of (content type, transfer encoding, body) parts."""
    out = [
        "From: <Saved by Blink>",
        "Snapshot-Content-Location: http://127.0.0.1:8000/shown",
        "Subject: t",
        "MIME-Version: 1.0",
        "Content-Type: multipart/related;",
        '\ttype="text/html";',
        f'\tboundary="{BOUNDARY}"',
        "",
        "",
    ]
    for n, (kind, encoding, body) in enumerate(parts):
        encoded = (
            quopri.encodestring(body).decode("ascii").replace("\n", "\r\n")
            if encoding == "quoted-printable"
            else base64.b64encode(body).decode("ascii")
        )
        out += [
            f"--{BOUNDARY}",
            f"Content-Type: {kind}",
            f"Content-ID: <frame-{n}@mhtml.blink>",
            f"Content-Transfer-Encoding: {encoding}",
            f"Content-Location: http://127.0.0.1:8000/part/{n}",
            "",
            encoded,
        ]
    out.append(f"--{BOUNDARY}--")
    return "\r\n".join(out)


def blink_html(charset: str, body: str) -> str:
    return (
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Type" '
        f'content="text/html; charset={charset}"><title>t</title></head><body>{body}</body></html>'
    )


def test_the_main_document_is_the_first_part_decoded_and_said_to_be_utf8() -> None:
    page = blink_html("windows-1252", "<h1>caf\xe9 " + "x" * 200 + "</h1>")  # a soft break
    iframe = blink_html("UTF-8", "<p>inner \u2603</p>")
    mhtml = archive(
        ("text/html", "quoted-printable", page.encode("cp1252")),
        ("text/html", "quoted-printable", iframe.encode()),
        ("image/png", "base64", b"\x89PNG\r\n\x1a\n" + bytes(2000)),
    )

    html = main_document(mhtml)

    assert html is not None
    assert "<h1>caf\xe9 " + "x" * 200 + "</h1>" in html  # decoded from its own encoding
    assert 'content="text/html; charset=utf-8"' in html  # kept as UTF-8, and says so
    assert "inner" not in html  # an iframe is its own part


def test_a_utf8_document_keeps_its_characters() -> None:
    page = blink_html("UTF-8", "<p>h\xe9llo \u2603 \u65e5\u672c</p>")
    html = main_document(archive(("text/html", "quoted-printable", page.encode())))
    assert html is not None and "<p>h\xe9llo \u2603 \u65e5\u672c</p>" in html


def test_no_document_when_the_archive_has_none() -> None:
    assert main_document("") is None
    assert main_document("not an archive\r\n\r\nat all") is None
    image_only = archive(("image/png", "base64", b"\x89PNG\r\n\x1a\n"))
    assert main_document(image_only) is None


class FakeFrame:
    pass


class FakeContext:
    def __init__(self) -> None:
        self.handlers: dict[str, Callable[..., Any]] = {}

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        self.handlers[event] = handler


class FakePage:
    def __init__(self) -> None:
        self.main_frame = FakeFrame()
        self.context = FakeContext()
        self.handlers: dict[str, Callable[..., Any]] = {}

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        self.handlers[event] = handler


class FakeRequest:
    def __init__(self, url: str, frame: FakeFrame | None, navigation: bool = True) -> None:
        self.url = url
        self._frame = frame
        self._navigation = navigation

    def is_navigation_request(self) -> bool:
        return self._navigation

    @property
    def frame(self) -> FakeFrame:
        if self._frame is None:  # Playwright's answer for a frame not created yet
            raise PlaywrightError("Frame for this navigation request is not available")
        return self._frame


def test_a_main_frame_navigation_is_in_flight_from_its_request_to_its_commit() -> None:
    page = FakePage()
    listeners: list[tuple[str, Callable[..., Any]]] = []
    watch = NavigationWatch.listening(page, listeners)  # type: ignore[arg-type]
    request, navigated = page.context.handlers["request"], page.handlers["framenavigated"]
    assert {name for name, _ in listeners} == {"request", "page:framenavigated"}

    request(FakeRequest("http://a.test/img.png", page.main_frame, navigation=False))
    request(FakeRequest("http://a.test/frame", FakeFrame()))  # an iframe's navigation
    request(FakeRequest("http://a.test/popup", None))  # a frame not created yet
    assert watch.pending_url is None

    request(FakeRequest("http://a.test/next", page.main_frame))
    navigated(FakeFrame())  # an iframe committed: the main frame still waits
    assert watch.pending_url == "http://a.test/next"
    request(FakeRequest("http://a.test/redirected", page.main_frame))  # a redirect's hop
    assert watch.pending_url == "http://a.test/redirected"
    navigated(page.main_frame)
    assert watch.pending_url is None
