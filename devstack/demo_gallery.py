"""The demo shop's front page with a gallery of small images: a page that makes as many
requests as a real one (``GET /gallery?images=N``).

The front page (``examples/site/index.html``) loads itself and its stylesheet; a real page
loads tens to hundreds of subresources, and what a browser's every request costs the
worker (Playwright's request events, the egress proxy) is what benches need to see
(``bench/cpu_per_job.py --path '/gallery?images=100'``). The page is the front page
(the same products, so the same workflow runs on it) with ``N`` images of its own, each a
distinct tiny SVG (``/gallery/img/<i>.svg``), none cacheable (the site sends ``no-store``).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs

GALLERY_PATH = "/gallery"
IMAGE_PREFIX = "/gallery/img/"
DEFAULT_IMAGES = 100
MAX_IMAGES = 1000

_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16">'
    '<rect width="16" height="16" fill="#{colour:06x}"/></svg>'
)


def image_count(query: str) -> int | None:
    """The images asked for (``images=N``, 0 to MAX_IMAGES), or None when the query does
    not say a count the page can have."""
    given = parse_qs(query, keep_blank_values=True).get("images", [str(DEFAULT_IMAGES)])[-1]
    if not (given.isascii() and given.isdigit()) or int(given) > MAX_IMAGES:
        return None
    return int(given)


def gallery_page(front_page: Path, images: int) -> bytes:
    """The front page with ``images`` images after its product list."""
    tags = "".join(
        f'<img src="{IMAGE_PREFIX}{i}.svg" width="16" height="16" alt="">' for i in range(images)
    )
    page = front_page.read_text(encoding="utf-8")
    return page.replace("</main>", f'<section id="gallery">{tags}</section>\n  </main>').encode()


def image(path: str) -> bytes | None:
    """The image at ``path`` (``/gallery/img/<i>.svg``), or None when there is none."""
    name = path.removeprefix(IMAGE_PREFIX)
    index = name.removesuffix(".svg")
    if not (name.endswith(".svg") and index.isascii() and index.isdigit()):
        return None  # an index's digits are ASCII ones ("²".isdigit(), int("²") fails)
    if int(index) >= MAX_IMAGES:
        return None
    return _SVG.format(colour=(int(index) * 2654435761) % 0xFFFFFF).encode()
