"""``image_gen``'s save against links a sandboxed command planted: the tool runs in the
agent's process, outside the sandbox, and used to ``mkdir(parents=True)`` and open
``generated_images/<session>/<call>.png`` by path -- a link ``generated_images ->
~/anywhere`` (no race needed) made it create folders and files wherever the user may
write. Now the folders are walked beneath the workspace without following links: such
a save fails (``OSError``: the image still comes back to the model, without a hint) and
nothing is written outside. Positive control: without the links the image is saved
there, a second one beside it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trio_agent._tools._image_gen import GENERATED_DIR, save_generated


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "ws").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path / "ws", tmp_path / "outside"


@pytest.mark.parametrize("planted", ["folder", "session"])
async def test_a_planted_link_saves_nothing_outside(places: tuple[Path, Path], planted: str) -> None:
    workspace, outside = places
    if planted == "folder":
        (workspace / GENERATED_DIR).symlink_to(outside)
    else:
        (workspace / GENERATED_DIR).mkdir()
        (workspace / GENERATED_DIR / "sess").symlink_to(outside)
    with pytest.raises(OSError, match="changed while it was in use: it is now a symlink"):
        await save_generated(workspace, "sess", "call", b"PNG")
    assert list(outside.iterdir()) == []


async def test_without_links_the_image_is_saved_in_the_workspace(places: tuple[Path, Path]) -> None:
    workspace, outside = places
    first = await save_generated(workspace, "sess", "call", b"PNG1")
    second = await save_generated(workspace, "sess", "call", b"PNG2")
    assert first == workspace / GENERATED_DIR / "sess" / "call.png" and first.read_bytes() == b"PNG1"
    assert second == workspace / GENERATED_DIR / "sess" / "call-2.png" and second.read_bytes() == b"PNG2"
    assert list(outside.iterdir()) == []
