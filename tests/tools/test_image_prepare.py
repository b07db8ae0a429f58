"""Images fitted to their ``detail`` as nanocodex fits them (``_image_prepare``), with real
images made by Pillow: ``view_image`` and the images an ``exec`` cell shows."""

from __future__ import annotations

import base64
import io
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image, ImageCms

import trio_agent as ta
from trio_agent._tools._image_prepare import (
    LIMITS,
    LOW_DETAIL_NOTE,
    PATCH,
    output_dimensions,
    prepare_output_item,
)
from trio_agent._tools._tool_errors import NestedToolError
from trio_agent._tools._view_image import view_image
from trio_agent.testing import FakeResponsesServer, answer_image_request

from ..conftest import make_config, scripted, warm


def make(size: tuple[int, int], image_format: str = "PNG", **options: object) -> bytes:
    """A real image: four coloured quadrants, so a resize that mixed them up would show."""
    width, height = size
    image = Image.new("RGB", size, (240, 240, 240))
    image.paste((220, 30, 10), (0, 0, width // 2, height // 2))
    image.paste((10, 40, 230), (0, height // 2, width // 2, height))
    out = io.BytesIO()
    image.save(out, format=image_format, **options)
    return out.getvalue()


def decoded(url: str) -> Image.Image:
    header, _, payload = url.partition(",")
    assert header.startswith("data:image/") and header.endswith(";base64")
    return Image.open(io.BytesIO(base64.b64decode(payload)))


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


# -- the rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "detail", "expected"),
    [
        ((2048, 2048), "high", (1600, 1600)),  # nanocodex's own examples
        ((6401, 100), "original", (6000, 94)),
        ((3201, 3201), "original", (3200, 3200)),
        ((4096, 1024), "high", (2048, 512)),  # the long side alone: 64x16 patches fit
        ((1600, 1600), "auto", (1600, 1600)),  # exactly 2,500 patches
        ((1000, 10), "high", (1000, 10)),
    ],
)
def test_output_dimensions_follow_nanocodex(size: tuple[int, int], detail: str, expected: tuple[int, int]) -> None:
    assert output_dimensions(*size, detail) == expected


@given(st.integers(1, 20_000), st.integers(1, 20_000), st.sampled_from(sorted(LIMITS)))
def test_every_size_ends_within_the_limits_keeping_its_shape(width: int, height: int, detail: str) -> None:
    longest, patches = LIMITS[detail]
    out_w, out_h = output_dimensions(width, height, detail)
    assert max(out_w, out_h) <= longest
    assert math.ceil(out_w / PATCH) * math.ceil(out_h / PATCH) <= patches
    assert out_w <= width and out_h <= height
    if min(out_w, out_h) > 20:  # the aspect ratio survives (up to rounding)
        assert abs(out_w / out_h - width / height) / (width / height) < 0.1


# -- view_image ------------------------------------------------------------------------------------


async def test_view_image_resizes_a_large_png_to_the_high_limits(tmp_path: Path) -> None:
    (tmp_path / "wide.png").write_bytes(make((3000, 1000)))
    result = await view_image(tmp_path, {"path": "wide.png"})
    assert result["detail"] == "high"
    with decoded(result["image_url"]) as image:
        assert (image.format, image.size) == ("PNG", output_dimensions(3000, 1000, "high"))
        rgb = image.convert("RGB")
        assert rgb.getpixel((10, 10)) == (220, 30, 10)  # quadrants where they were
        assert rgb.getpixel((image.width - 10, image.height - 10)) == (240, 240, 240)
    original = await view_image(tmp_path, {"path": "wide.png", "detail": "original"})
    with decoded(original["image_url"]) as image:
        assert image.size == (3000, 1000)  # within original's 6000 px and 10,000 patches


async def test_view_image_keeps_a_fitting_image_byte_for_byte(tmp_path: Path) -> None:
    data = make((640, 480), "JPEG", quality=90)
    (tmp_path / "photo.jpg").write_bytes(data)
    result = await view_image(tmp_path, {"path": "photo.jpg"})
    assert result["image_url"] == data_url(data, "image/jpeg")


async def test_view_image_keeps_jpeg_and_webp_and_their_icc_profile(tmp_path: Path) -> None:
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    (tmp_path / "big.jpg").write_bytes(make((4000, 3000), "JPEG", icc_profile=icc))
    (tmp_path / "big.webp").write_bytes(make((2500, 2500), "WEBP", lossless=True))
    jpeg = await view_image(tmp_path, {"path": "big.jpg"})
    assert jpeg["image_url"].startswith("data:image/jpeg;base64,")
    with decoded(jpeg["image_url"]) as image:
        assert image.format == "JPEG" and image.size == output_dimensions(4000, 3000, "high")
        assert image.info.get("icc_profile") == icc
    webp = await view_image(tmp_path, {"path": "big.webp"})
    with decoded(webp["image_url"]) as image:
        assert (image.format, image.size) == ("WEBP", (1600, 1600))


async def test_a_gif_is_sent_as_png(tmp_path: Path) -> None:
    (tmp_path / "anim.gif").write_bytes(make((64, 64), "GIF"))
    result = await view_image(tmp_path, {"path": "anim.gif"})
    with decoded(result["image_url"]) as image:
        assert (image.format, image.size) == ("PNG", (64, 64))


async def test_a_damaged_image_is_a_failed_call_that_says_so(tmp_path: Path) -> None:
    (tmp_path / "broken.png").write_bytes(make((100, 100))[:60])  # the signature, then nothing
    with pytest.raises(NestedToolError, match=r"view_image: broken.png: the image cannot be decoded"):
        await view_image(tmp_path, {"path": "broken.png"})


async def test_without_pillow_view_image_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pixel.png").write_bytes(make((4, 4)))
    url = data_url(make((3000, 3000)))
    monkeypatch.setitem(sys.modules, "PIL", None)  # `import PIL` now raises ImportError
    with pytest.raises(NestedToolError, match=r"needs Pillow.*pip install 'trio-agent\[images\]'"):
        await view_image(tmp_path, {"path": "pixel.png"})
    # an image shown by a cell passes unchanged then (as before), without its detail
    assert prepare_output_item({"type": "input_image", "image_url": url, "detail": "high"}) == {
        "type": "input_image", "image_url": url,
    }


# -- images of a cell's output ---------------------------------------------------------------------


def test_an_output_image_is_fitted_to_its_detail_and_sent_without_it() -> None:
    big = data_url(make((5000, 500)))
    high = prepare_output_item({"type": "input_image", "image_url": big, "detail": "high"})
    assert set(high) == {"type", "image_url"}
    with decoded(str(high["image_url"])) as image:
        assert image.size == output_dimensions(5000, 500, "high")
    default = prepare_output_item({"type": "input_image", "image_url": big})
    assert default == high  # no detail: high, as nanocodex's image() defaults
    original = prepare_output_item({"type": "input_image", "image_url": big, "detail": "original"})
    with decoded(str(original["image_url"])) as image:
        assert image.size == (5000, 500)


def test_low_detail_and_undecodable_images_become_notes() -> None:
    small = data_url(make((8, 8)))
    assert prepare_output_item({"type": "input_image", "image_url": small, "detail": "low"}) == {
        "type": "input_text", "text": LOW_DETAIL_NOTE,
    }
    junk = prepare_output_item({"type": "input_image", "image_url": data_url(b"not an image")})
    assert junk["type"] == "input_text"
    assert str(junk["text"]).startswith("image content omitted because it could not be processed")
    assert prepare_output_item({"type": "input_text", "text": "x"}) == {"type": "input_text", "text": "x"}


# -- image_gen__imagegen's referenced images -------------------------------------------------------


async def test_a_referenced_image_is_fitted_to_the_original_limits(
    server: FakeResponsesServer, workspace: Path
) -> None:
    (workspace / "banner.png").write_bytes(make((7000, 70)))
    source = "await tools.image_gen__imagegen({prompt: 'recolour', referenced_image_paths: ['banner.png']});"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        edit = await answer_image_request(server)
        body: dict[str, Any] = edit.body
        [sent] = body["images"]
        with decoded(sent["image_url"]) as image:
            assert (image.format, image.size) == ("PNG", (6000, 60))  # nanocodex: original detail
        await conn.next_request()
        await conn.send_final("resp-final")

    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, api_base_url=server.http_base_url)
    tools = ta.Tools.default().with_image_generation()
    async with scripted(script), ta.open_agent(make_config(server, workspace, responses=responses, tools=tools)) as a:
        await (await a.prompt("go")).result()


def test_an_image_past_the_pixel_bound_is_refused_before_decoding() -> None:
    from trio_agent._tools._image_prepare import MAX_PIXELS, ImagePreparationError, fit

    side = int(MAX_PIXELS**0.5) + 16
    header = Image.new("1", (side, side))  # 1 bit per pixel: a small file, a huge image
    out = io.BytesIO()
    header.save(out, format="PNG")
    with pytest.raises(ImagePreparationError, match=r"pixels; images over \d+ pixels are not decoded"):
        fit(out.getvalue(), "high")
