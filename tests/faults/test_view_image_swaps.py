"""``view_image`` (and ``image_gen``'s edit, which reads its input the same way) against
a command that swaps the path after it was checked: a background ``exec_command``
session can loop ``ln -sf``/``mv`` while the model calls the tool, and the tool runs
in the agent's process, outside the sandbox.

The check and the read used to be two lookups of the same path: a swap between them
made the tool read an image outside the workspace (the check said inside), or open a
FIFO -- a wait without end in a worker thread that no cancel ends, so the turn could
not be interrupted nor the agent closed. The swap is made deterministic here, at
each moment a check could be made before the read: right after the path was resolved
(``_confined``), and right after a lookup says it is a regular file (``is_file``, which
the tool need not make: then the swap does not happen, and the call reads the image
that was there -- a read before any swap is a sound answer too).

- swapped for a link to an image outside the workspace: the outside image never read
  (refused, or the image read before the swap);
- swapped for a FIFO (a writer waits on it with an image, so that a reader that opens
  it and waits gets that image and the test fails rather than hangs): never read;
- positive control: the same call without a swap reads the image.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from trio_agent._tools import _view_image
from trio_agent._tools._tool_errors import NestedToolError
from trio_agent.testing import PNG_PIXEL

Swap = Callable[[Path], None]


MOMENTS = ["after-resolving", "after-is-file"]


def hook_after_check(monkeypatch: pytest.MonkeyPatch, moment: str, swap: Swap, target: Path) -> None:
    """Run ``swap(target)`` once, at ``moment`` of the call."""
    done: list[bool] = []

    def once() -> None:
        if not done:
            done.append(True)
            swap(target)

    if moment == "after-resolving":
        checked: Callable[..., Awaitable[object]] = _view_image._confined

        async def then_swap(*args: object) -> object:
            resolved = await checked(*args)
            once()
            return resolved

        monkeypatch.setattr(_view_image, "_confined", then_swap)
        return
    is_file: Callable[[trio.Path], Awaitable[bool]] = trio.Path.is_file

    async def is_file_then_swap(self: trio.Path) -> bool:
        answer = await is_file(self)
        if answer and os.path.basename(self) == target.name:
            once()
        return answer

    monkeypatch.setattr(trio.Path, "is_file", is_file_then_swap)


def refused_or_original(outcome: tuple[str, bytes] | NestedToolError, refusal: str) -> None:
    if isinstance(outcome, NestedToolError):
        assert re.search(refusal, str(outcome)), outcome
    else:
        assert outcome == ("image/png", PNG_PIXEL)  # read before any swap


async def outcome_of(workspace: Path) -> tuple[str, bytes] | NestedToolError:
    try:
        return await _view_image.read_workspace_image(workspace, "img.png", "view_image")
    except NestedToolError as exc:
        return exc


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    inside = tmp_path / "ws"
    inside.mkdir()
    (inside / "img.png").write_bytes(PNG_PIXEL)
    return inside


@pytest.mark.parametrize("moment", MOMENTS)
async def test_a_swap_to_a_link_out_of_the_workspace_reads_nothing_outside(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    secret = workspace.parent / "secret.png"
    secret.write_bytes(PNG_PIXEL + b"the secret")

    def to_link(path: Path) -> None:
        path.unlink()
        path.symlink_to(secret)

    hook_after_check(monkeypatch, moment, to_link, workspace / "img.png")
    refused_or_original(await outcome_of(workspace), r"view_image: cannot read img\.png: it changed while it was read")


@pytest.mark.parametrize("moment", MOMENTS)
async def test_a_swap_to_a_fifo_is_refused_not_waited_on(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    fifo = workspace / "img.png"
    writers: list[threading.Thread] = []

    def write_an_image() -> None:
        try:
            with open(fifo, "wb") as out:  # waits for a reader
                out.write(PNG_PIXEL + b"from the fifo")
        except OSError:
            pass  # the reader closed first: it did not wait for the image

    def to_fifo(path: Path) -> None:
        path.unlink()
        os.mkfifo(path)
        writers.append(threading.Thread(target=write_an_image, daemon=True))
        writers[0].start()

    hook_after_check(monkeypatch, moment, to_fifo, fifo)
    try:
        refused_or_original(await outcome_of(workspace), r"view_image: img\.png is not a regular file")
    finally:
        if writers:
            released = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the writer, if it still waits
            writers[0].join()
            os.close(released)


async def test_without_a_swap_the_same_call_reads_the_image(workspace: Path) -> None:
    assert await _view_image.read_workspace_image(workspace, "img.png", "view_image") == ("image/png", PNG_PIXEL)
    absolute = str(workspace / "img.png")
    assert await _view_image.read_workspace_image(workspace, absolute, "view_image") == ("image/png", PNG_PIXEL)
    (workspace / "sub").mkdir()
    (workspace / "sub" / "link.png").symlink_to("../img.png")  # a link that stays inside
    assert await _view_image.read_workspace_image(workspace, "sub/link.png", "view_image") == (
        "image/png", PNG_PIXEL)
