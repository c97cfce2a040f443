"""The demo site's gallery: the front page making as many requests as a real page, for the
benches (``bench/cpu_per_job.py --path '/gallery?images=N'``)."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from devstack.demo_site import DemoSite


@pytest.fixture(scope="module")
def site() -> Iterator[DemoSite]:
    served = DemoSite().start()
    try:
        yield served
    finally:
        served.stop()


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def test_the_gallery_is_the_front_page_with_as_many_images_as_asked(site: DemoSite) -> None:
    status, kind, body = get(f"{site.url}/gallery?images=7")
    page = body.decode()
    assert status == 200 and kind.startswith("text/html")
    # The front page's products, so the bench's workflow reads the same data from it.
    assert page.count('class="product"') == 5 and "Storm lantern" in page
    sources = re.findall(r'<img src="([^"]+)"', page)
    assert len(sources) == 7 and len(set(sources)) == 7
    images = [get(f"{site.url}{src}") for src in sources]
    assert {(s, k) for s, k, _ in images} == {(200, "image/svg+xml")}
    assert len({b for _, _, b in images}) == 7  # distinct: none answered from another's copy
    assert get(f"{site.url}/gallery")[2].decode().count("<img ") == 100  # the default


def test_a_count_the_gallery_cannot_have_is_refused(site: DemoSite) -> None:
    for query in ("images=-1", "images=abc", "images=1001", "images=", "images=%C2%B2"):
        assert get(f"{site.url}/gallery?{query}")[0] == 400, query
    assert get(f"{site.url}/gallery?images=0")[2].decode().count("<img ") == 0
    for path in (
        "/gallery/img/1000.svg",
        "/gallery/img/x.svg",
        "/gallery/img/3.png",
        "/gallery/img/%C2%B2.svg",
    ):
        assert get(f"{site.url}{path}")[0] == 404, path
