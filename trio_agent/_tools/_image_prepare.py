"""Images bounded for the model as nanocodex bounds them (``nanocodex.md`` sec. 5.7).

Theory of operation. The model reads an image in 32x32-pixel patches, and the API
refuses or down-scales images past a budget. So every image the agent hands the model
from a tool -- ``view_image``'s, and whatever an ``exec`` cell shows with ``image(...)``
-- is fitted to the limits of its ``detail`` first:

* ``high`` and ``auto``: at most 2048 px on the long side and at most 2,500 patches;
* ``original``: at most 6000 px and 10,000 patches;
* ``low``: not supported (nanocodex replaces the image with a note; so do we).

An image within its limits is passed on byte for byte when it is a PNG, JPEG or WebP
(other formats -- GIF -- are re-encoded as PNG). One over them is scaled, keeping its
aspect ratio: first so that its long side fits (rounded), and if the patch count is
still over, by ``sqrt(32 * 32 * max_patches / (w * h))`` shrunk further so that the
patches across and down are whole numbers (floored) -- nanocodex's rule, which maps a
2048x2048 image to 1600x1600 (50x50 patches). Downsampling averages areas (Pillow's
``BOX`` filter); the format is kept (JPEG at quality 85, WebP lossless), as are the
ICC profile and EXIF data.

Pillow does the decoding and is an optional dependency (``pip install
'trio-agent[images]'``), imported on first use only: without it ``view_image`` fails
with a message that says how to install it, and images from ``image(...)`` pass
unchanged (as before). Decoding is bounded (:data:`MAX_PIXELS`); a file that is not a
decodable image is a :class:`ImagePreparationError`, never a traceback. The work is
synchronous CPU work: callers run it in a worker thread (``trio.to_thread``).

On the wire an image in a tool output carries no ``detail``: nanocodex drops it there
("Responses Lite"), and :func:`prepare_output_item` does the same once the limits are
applied.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "LIMITS",
    "LOW_DETAIL_NOTE",
    "MAX_PIXELS",
    "PATCH",
    "ImagePreparationError",
    "PillowMissing",
    "fit",
    "output_dimensions",
    "prepare",
    "prepare_output_item",
]

PATCH = 32
#: ``detail`` -> (longest side in pixels, patches).
LIMITS = {"high": (2048, 2_500), "auto": (2048, 2_500), "original": (6000, 10_000)}
#: Decoding bound: an image with more pixels is refused before its pixels are allocated
#: (80 Mi pixels, 320 MiB as RGBA: under Pillow's own decompression-bomb warning).
MAX_PIXELS = 80 * 1024 * 1024
LOW_DETAIL_NOTE = "image content omitted because detail 'low' is not supported; use 'high', 'original', or 'auto'"
_KEPT_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}


class ImagePreparationError(Exception):
    """The bytes are not an image Pillow can decode, or too large to decode."""


class PillowMissing(ImagePreparationError):
    """Pillow is not installed."""

    def __init__(self) -> None:
        super().__init__(
            "resizing images needs Pillow, which is not installed; install it with "
            "`pip install 'trio-agent[images]'` (or `pip install pillow`)"
        )


def _fits(width: int, height: int, longest: int, patches: int) -> bool:
    return max(width, height) <= longest and math.ceil(width / PATCH) * math.ceil(height / PATCH) <= patches


def output_dimensions(width: int, height: int, detail: str) -> tuple[int, int]:
    """The size an image of ``width`` x ``height`` is sent at (the module docstring's rule)."""
    longest, patches = LIMITS[detail]
    width, height = max(width, 1), max(height, 1)
    if _fits(width, height, longest, patches):
        return width, height
    scale = min(longest / max(width, height), 1.0)
    width, height = max(round(width * scale), 1), max(round(height * scale), 1)
    if _fits(width, height, longest, patches):
        return width, height
    scale = math.sqrt(PATCH * PATCH * patches / width / height)
    across, down = width * scale / PATCH, height * scale / PATCH
    scale *= min(math.floor(across) / across, math.floor(down) / down)
    return max(math.floor(width * scale), 1), max(math.floor(height * scale), 1)


def _pillow() -> type[Image.Image]:
    try:
        from PIL import Image
    except ImportError:
        raise PillowMissing from None
    return Image.Image


def fit(data: bytes, detail: str) -> tuple[str, bytes]:
    """``(mime, bytes)`` of the image ``data`` within the limits of ``detail`` (``high``,
    ``auto`` or ``original``); :class:`ImagePreparationError` if it cannot be decoded,
    :class:`PillowMissing` without Pillow."""
    _pillow()
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise ImagePreparationError(
                    f"the image is {width}x{height} pixels; images over {MAX_PIXELS} pixels are not decoded"
                )
            image.load()  # the whole image decodes: a damaged one is refused here, not by the API
            target = output_dimensions(width, height, detail)
            kept = _KEPT_FORMATS.get(image.format or "")
            if target == (width, height) and kept is not None:
                return kept, data
            return _encode(image, target, image.format if kept is not None else "PNG")
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ImagePreparationError(f"the image cannot be decoded: {exc}") from None


def _encode(image: Image.Image, size: tuple[int, int], image_format: str | None) -> tuple[str, bytes]:
    from PIL import Image

    icc = image.info.get("icc_profile")
    exif = image.info.get("exif")
    if image.mode not in ("RGB", "RGBA", "L", "LA"):
        image = image.convert("RGBA" if "A" in image.getbands() or "transparency" in image.info else "RGB")
    if image.size != size:
        image = image.resize(size, Image.Resampling.BOX)
    options: dict[str, object] = {}
    if icc:
        options["icc_profile"] = icc
    if exif:
        options["exif"] = exif
    if image_format == "JPEG":
        if image.mode not in ("RGB", "L"):
            image = image.convert("RGB")
        options["quality"] = 85
    elif image_format == "WEBP":
        options["lossless"] = True
    else:
        image_format = "PNG"
    out = io.BytesIO()
    image.save(out, format=image_format, **options)
    return _KEPT_FORMATS[image_format], out.getvalue()


def prepare(data: bytes, detail: str) -> tuple[str, bytes]:
    """:func:`fit` for ``view_image``: the same, with ``detail`` checked."""
    if detail not in LIMITS:
        raise ImagePreparationError(f"detail {detail!r} is not one of high, auto, original")
    return fit(data, detail)


def prepare_output_item(item: dict[str, object]) -> dict[str, object]:
    """An ``input_image`` content item of a tool output as it goes on the wire: fitted to
    its ``detail`` (``high`` when absent) and without ``detail``; ``low`` becomes a text
    note, as in nanocodex. Without Pillow, or for a URL that is not base64 data, the image
    passes unchanged (less its ``detail``); one that cannot be decoded becomes a note
    saying so. Anything that is not an ``input_image`` is returned as is."""
    if item.get("type") != "input_image":
        return item
    detail = str(item.get("detail") or "high").lower()
    if detail == "low":
        return {"type": "input_text", "text": LOW_DETAIL_NOTE}
    bare = {key: value for key, value in item.items() if key != "detail"}
    url = item.get("image_url")
    if not isinstance(url, str) or detail not in LIMITS:
        return bare
    header, comma, payload = url.partition(",")
    if not comma or not header.lower().startswith("data:") or ";base64" not in header.lower():
        return bare
    try:
        data = base64.b64decode(payload, validate=False)
        mime, fitted = fit(data, detail)
    except PillowMissing:
        return bare
    except (ImagePreparationError, binascii.Error, ValueError) as exc:
        return {"type": "input_text", "text": f"image content omitted because it could not be processed ({exc})"}
    if fitted is data:
        return bare
    return {**bare, "image_url": f"data:{mime};base64,{base64.b64encode(fitted).decode('ascii')}"}
