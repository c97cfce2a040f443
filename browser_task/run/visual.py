"""The tracked screenshot against the baseline's: the share of pixels that changed.

A pixel counts as changed when any of its colour channels differs by more than
``CHANNEL_TOLERANCE`` (about what pixelmatch's default threshold lets through), so the
dithering of a gradient is not a change and a moved button is. Where the two sizes differ,
the part only one of them covers counts as changed. ``diff.png`` shows this run's
screenshot faded to grey with the changed pixels in red.

Pillow does it in C (ImageChops): the comparison itself is about 3 ms of CPU for a 1280x800
pair, decoding the two PNGs 20 ms, drawing and writing diff.png (only over the threshold)
30 ms more; pixelmatch, pure Python, took 2.1 s on such a pair (docs/performance.md,
"Monitors").
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

CHANNEL_TOLERANCE = 25
_CHANGED = (255, 0, 0)


@dataclass(frozen=True)
class PixelDiff:
    ratio: float
    # PNG of the difference (None when nothing changed).
    diff_png: bytes | None
    note: str | None = None


def pixel_diff(
    before_png: bytes, after_png: bytes, *, tolerance: int = CHANNEL_TOLERANCE
) -> PixelDiff:
    # Imported on a visual monitor's first comparison: most workers never make one, and
    # Pillow is ~10 modules and a few MB held for nothing otherwise.
    from PIL import Image, ImageChops

    before = Image.open(io.BytesIO(before_png)).convert("RGB")
    after = Image.open(io.BytesIO(after_png)).convert("RGB")
    width, height = max(before.width, after.width), max(before.height, after.height)
    common = (0, 0, min(before.width, after.width), min(before.height, after.height))
    delta = ImageChops.difference(before.crop(common), after.crop(common))
    channels = delta.split()
    largest = ImageChops.lighter(ImageChops.lighter(channels[0], channels[1]), channels[2])
    changed_mask = largest.point(lambda v: 255 if v > tolerance else 0)
    # Outside the common part every pixel is changed.
    mask = Image.new("L", (width, height), 255)
    mask.paste(changed_mask, common)
    changed = mask.histogram()[255]
    ratio = changed / float(width * height)
    note = None
    if before.size != after.size:
        note = (
            f"the size changed from {before.width}x{before.height} to {after.width}x{after.height}"
        )
    if changed == 0:
        return PixelDiff(0.0, None, note)
    return PixelDiff(ratio, _diff_image(after, mask, (width, height)), note)


def _diff_image(after: Image.Image, mask: Image.Image, size: tuple[int, int]) -> bytes:
    from PIL import Image

    faded = Image.new("L", size, 255)
    faded.paste(after.convert("L").point(lambda v: 170 + v // 3), (0, 0))
    picture = Image.composite(Image.new("RGB", size, _CHANGED), faded.convert("RGB"), mask)
    out = io.BytesIO()
    picture.save(out, format="PNG", compress_level=1)  # written once, read rarely: fast zlib
    return out.getvalue()
