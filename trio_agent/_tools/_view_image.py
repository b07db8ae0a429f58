"""``view_image {path, detail?}``: an image file of the workspace as an ``input_image``.

``path`` is relative to the workspace (an absolute path is accepted when it lies
inside it); after resolving symlinks it must still be inside the workspace. The
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
from pathlib import Path

import trio

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


async def _confined(workspace: Path, path: object, tool: str) -> trio.Path:
    if not isinstance(path, str) or not path.strip():
        raise NestedToolError(f"{tool}: path must be a non-empty string (a file relative to the workspace)")
    if "\x00" in path:
        raise NestedToolError(f"{tool}: path must not contain NUL characters")
    root = await trio.Path(workspace).resolve()
    candidate = await (root / path).resolve()  # an absolute `path` replaces `root` here; symlinks followed
    if not candidate.is_relative_to(root):
        raise NestedToolError(f"{tool}: {path} is outside the workspace ({root}); pass a path inside it")
    return candidate


async def read_workspace_image(workspace: Path, path: object, tool: str) -> tuple[str, bytes]:
    """``(mime, bytes)`` of the image at ``path`` in ``workspace``, or ``NestedToolError``."""
    target = await _confined(workspace, path, tool)
    try:
        info = await target.stat()
    except FileNotFoundError:
        raise NestedToolError(f"{tool}: no file at {path}") from None
    except OSError as exc:
        raise NestedToolError(f"{tool}: cannot read {path}: {exc.strerror or exc}") from None
    if not await target.is_file():
        raise NestedToolError(f"{tool}: {path} is not a regular file")
    if info.st_size > MAX_IMAGE_BYTES:
        raise NestedToolError(
            f"{tool}: {path} is {info.st_size} bytes; images over {MAX_IMAGE_BYTES} bytes (20 MiB) are refused"
        )
    try:
        async with await target.open("rb") as file:
            data = await file.read(MAX_IMAGE_BYTES + 1)  # bounded even if the file grew
    except OSError as exc:
        raise NestedToolError(f"{tool}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise NestedToolError(f"{tool}: {path} is over {MAX_IMAGE_BYTES} bytes (20 MiB); images that big are refused")
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
