"""Where ``image_gen__imagegen`` saves what it generated (``_image_gen.save_generated``):
under the workspace, by session and call, never over an existing file."""

from __future__ import annotations

from pathlib import Path

import pytest

from trio_agent._tools._image_gen import MAX_HINT_BYTES, output_hint, save_generated


async def test_images_are_saved_by_session_and_call_with_safe_names(tmp_path: Path) -> None:
    saved = await save_generated(tmp_path, "sess/../1", "call-9/code-2", b"png bytes")
    assert saved == tmp_path / "generated_images" / "sess____1" / "call-9_code-2.png"
    assert saved.read_bytes() == b"png bytes"
    empty = await save_generated(tmp_path, "", "", b"x")
    assert empty == tmp_path / "generated_images" / "session" / "generated_image.png"


async def test_a_name_in_use_is_never_overwritten(tmp_path: Path) -> None:
    first = await save_generated(tmp_path, "s", "c", b"first")
    second = await save_generated(tmp_path, "s", "c", b"second")
    third = await save_generated(tmp_path, "s", "c", b"third")
    assert [p.name for p in (first, second, third)] == ["c.png", "c-2.png", "c-3.png"]
    assert [p.read_bytes() for p in (first, second, third)] == [b"first", b"second", b"third"]


async def test_an_unwritable_place_raises_oserror(tmp_path: Path) -> None:
    (tmp_path / "generated_images").write_text("a file where the folder should be")
    with pytest.raises(OSError):
        await save_generated(tmp_path, "s", "c", b"x")


def test_the_hint_names_the_file_and_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "generated_images" / "s" / "c.png"
    hint = output_hint(path)
    assert hint is not None and str(path) in hint and "copy it" in hint
    assert output_hint(Path("/" + "d" * MAX_HINT_BYTES) / "c.png") is None
