"""``view_image {path, detail?}``: an image file of the workspace as an ``input_image``.

``path`` is relative to the workspace (an absolute path is accepted when it lies
inside it); after resolving symlinks it must still be inside the workspace, and the
file is then opened beneath the workspace by its components, no link followed, so a
command swapping the path after the check reads nothing outside (``_beneath``). The
file must be a PNG, JPEG, GIF or WebP image (recognised by its first bytes, not its
name) of at most ``MAX_IMAGE_BYTES`` (20 MiB); anything else is a failed result that
says why. The image is fitted to its ``detail`` (``high``: at most 2048 px and 2,500
patches; ``original``: 6000 px and 10,000 patches) as ``_image_prepare`` describes,
which needs Pillow (``trio-agent[images]``; without it the call fails saying so). The
value is ``{"type": "input_image", "image_url": "data:...", "detail": ...}``, which
``image(...)`` in an ``exec`` cell shows to the model (the ``detail`` stays in the
JavaScript value; the image item sent to the model carries none).
"""

from __future__ import annotations

import base64
import errno
from pathlib import Path

import trio

from ._beneath import Beneath, Changed, Escape, Parts, TooLarge, TooManyLinks
from ._tool_errors import NestedToolError

__all__ = ["MAX_IMAGE_BYTES", "image_mime", "read_workspace_image", "view_image"]

MAX_IMAGE_BYTES = 20 * 1024 * 1024
_DETAILS = ("high", "original")


def image_mime(data: bytes) -> str | None:
    """The MIME type of an image by its signature, or None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


async def _confined(workspace: Path, path: object, tool: str) -> Parts:
    """``path``'s components beneath the workspace, symlinks resolved there (``_beneath``)."""
    if not isinstance(path, str) or not path.strip():
        raise NestedToolError(f"{tool}: path must be a non-empty string (a file relative to the workspace)")
    if "\x00" in path:
        raise NestedToolError(f"{tool}: path must not contain NUL characters")
    return await trio.to_thread.run_sync(_resolve, workspace, path, tool)


def _resolve(workspace: Path, path: str, tool: str) -> Parts:
    try:
        with Beneath(workspace) as fs:
            return fs.resolve(path)
    except Escape:
        raise NestedToolError(f"{tool}: {path} is outside the workspace ({fs.real}); pass a path inside it") from None
    except TooManyLinks:
        raise NestedToolError(f"{tool}: cannot read {path}: too many levels of symbolic links") from None
    except OSError as exc:
        raise NestedToolError(f"{tool}: cannot read {path}: {exc.strerror or exc}") from None


async def read_workspace_image(workspace: Path, path: object, tool: str) -> tuple[str, bytes]:
    """``(mime, bytes)`` of the image at ``path`` in ``workspace``, or ``NestedToolError``.

    The path is resolved beneath the workspace, then the file is opened by its
    components, none followed (``O_NOFOLLOW``, without blocking): a command that swaps
    the path for a link out of the workspace or for a FIFO after it was resolved gets
    the call refused, never a read outside nor a wait no cancel ends. The read runs in
    a worker thread, abandoned on cancel (it cannot block: a regular file only)."""
    parts = await _confined(workspace, path, tool)
    assert isinstance(path, str)
    return await trio.to_thread.run_sync(_read, workspace, parts, path, tool, abandon_on_cancel=True)


def _read(workspace: Path, parts: Parts, path: str, tool: str) -> tuple[str, bytes]:
    try:
        with Beneath(workspace) as fs:
            if not parts:
                raise NestedToolError(f"{tool}: {path} is not a regular file")
            data, _status = fs.read_bytes(parts, limit=MAX_IMAGE_BYTES)
    except TooLarge as exc:
        raise NestedToolError(
            f"{tool}: {path} is {exc.size} bytes; images over {MAX_IMAGE_BYTES} bytes (20 MiB) are refused"
        ) from None
    except FileNotFoundError:
        raise NestedToolError(f"{tool}: no file at {path}") from None
    except (IsADirectoryError, Changed):
        raise NestedToolError(f"{tool}: {path} is not a regular file") from None
    except OSError as exc:
        why = "it changed while it was read (a symbolic link)" if exc.errno == errno.ELOOP else exc.strerror or exc
        raise NestedToolError(f"{tool}: cannot read {path}: {why}") from None
    mime = image_mime(data)
    if mime is None:
        raise NestedToolError(f"{tool}: {path} is not a PNG, JPEG, GIF or WebP image")
    return mime, data


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


async def view_image(workspace: Path, arguments: object) -> dict[str, str]:
    if not isinstance(arguments, dict):
        raise NestedToolError("view_image expects an object {path, detail?}")
    unknown = sorted(set(arguments) - {"path", "detail"})
    if unknown:
        raise NestedToolError(f"view_image: unexpected field {unknown[0]!r} (the fields are: path, detail)")
    detail = arguments.get("detail", "high")
    if detail not in _DETAILS:
        raise NestedToolError(f'view_image: detail must be "high" or "original", got {detail!r}')
    mime, data = await read_workspace_image(workspace, arguments.get("path"), "view_image")
    from ._image_prepare import ImagePreparationError, prepare

    try:  # Pillow's decoding and resizing block: a worker thread, abandoned on cancel
        mime, data = await trio.to_thread.run_sync(prepare, data, detail, abandon_on_cancel=True)
    except ImagePreparationError as exc:
        raise NestedToolError(f"view_image: {arguments.get('path')}: {exc}") from None
    return {"type": "input_image", "image_url": data_url(mime, data), "detail": detail}
