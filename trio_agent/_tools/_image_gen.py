"""``image_gen__imagegen``: generate or edit an image with ``gpt-image-2`` (opt-in).

``{prompt}`` POSTs ``{api_base_url}/images/generations``; with
``referenced_image_paths`` (workspace images, at most 5) or
``num_last_images_to_include`` (the last 1-5 images of the conversation: prompts and
tool outputs) it POSTs ``{api_base_url}/images/edits`` with those images as data
URLs. Both bodies ask for ``background``/``quality``/``size`` ``"auto"``, as
nanocodex does (5.3). The first returned ``b64_json`` comes back as
``{"type": "input_image", "image_url": "data:image/png;base64,...", "output_hint": ...}``.

The image is also saved in the workspace, where the model and the user can use it:
``generated_images/<session id>/<call id>.png`` (nanocodex's layout under its save
root; each part reduced to ``[A-Za-z0-9_-]``). The name is collision-safe: the file
is created exclusively, and ``-2``, ``-3``, ... are tried if it exists (a resumed
session reusing a call id never overwrites an earlier image), and the folders are walked
beneath the workspace without following links (``_beneath``): the tool runs outside the
sandbox, and a command may have planted ``generated_images`` as a link to anywhere --
then nothing is saved. ``output_hint`` tells
the model where it is (``image(value)`` in a cell shows the hint after the image, as
nanocodex's tool output does); if saving fails the image still comes back, without
the hint.

One attempt, bounded by ``IMAGE_TIMEOUT`` (300 s: generation is slow) on Trio's
clock; responses over 64 MiB are refused.
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

import trio

from ._beneath import Beneath, Changed
from ._remote import RemoteApi, RemoteError
from ._schema import Shape
from ._tool_errors import InvalidToolArguments, NestedToolError
from ._view_image import data_url, read_workspace_image

__all__ = [
    "GENERATED_DIR",
    "IMAGEGEN_DESCRIPTION",
    "IMAGE_MODEL",
    "imagegen_schema",
    "output_hint",
    "recent_images",
    "run_image_generation",
    "save_generated",
]

IMAGE_MODEL = "gpt-image-2"
MAX_EDIT_IMAGES = 5
IMAGE_TIMEOUT = 300.0
MAX_RESPONSE_BYTES = 64 << 20
GENERATED_DIR = "generated_images"
#: A longer hint (a very deep workspace) is left out, as nanocodex does.
MAX_HINT_BYTES = 1024
_MAX_NAME_TRIES = 1000
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

IMAGEGEN_DESCRIPTION = (
    f"Generate an image from a text prompt ({IMAGE_MODEL}), or edit images: pass workspace image "
    f"paths as referenced_image_paths, or num_last_images_to_include to edit the last 1-{MAX_EDIT_IMAGES} "
    "images of the conversation (not both). Resolves to {type: \"input_image\", image_url, output_hint?}; "
    f"pass it to `image(...)` to show it. The image is also saved as a PNG under `{GENERATED_DIR}/` in the "
    "workspace; output_hint says where."
)


class ImagegenArguments(TypedDict):
    prompt: Annotated[str, "What to draw, or how to change the images."]
    referenced_image_paths: NotRequired[Annotated[list[str], "Workspace images to edit (at most 5)."]]
    num_last_images_to_include: NotRequired[Annotated[int, "Edit the last N images of the conversation (1-5)."]]


_shape: Shape | None = None


def _imagegen_shape() -> Shape:
    global _shape
    if _shape is None:
        _shape = Shape(ImagegenArguments, "tool 'image_gen__imagegen'")
    return _shape


def imagegen_schema() -> dict[str, Any]:
    schema = dict(_imagegen_shape().schema)
    properties = dict(schema["properties"])
    properties["referenced_image_paths"] = {**properties["referenced_image_paths"], "maxItems": MAX_EDIT_IMAGES}
    properties["num_last_images_to_include"] = {
        **properties["num_last_images_to_include"], "minimum": 1, "maximum": MAX_EDIT_IMAGES,
    }
    schema["properties"] = properties
    return schema


def _images_of(content: object) -> list[str]:
    if not isinstance(content, list):
        return []
    return [
        str(part["image_url"]) for part in content
        if isinstance(part, dict) and part.get("type") == "input_image" and isinstance(part.get("image_url"), str)
        and str(part["image_url"]).startswith("data:")
    ]


def recent_images(history: Iterable[Mapping[str, Any]], count: int) -> list[str]:
    """The data URLs of the last ``count`` images in ``history`` (messages and tool
    outputs), oldest first."""
    found: list[str] = []
    for item in history:
        if item.get("type") == "message":
            found.extend(_images_of(item.get("content")))
        elif item.get("type") in ("function_call_output", "custom_tool_call_output"):
            found.extend(_images_of(item.get("output")))
    return found[-count:] if count else []


async def _edit_images(arguments: dict[str, Any], workspace: Path, history: Iterable[Mapping[str, Any]]) -> list[str]:
    paths = arguments.get("referenced_image_paths") or []
    count = arguments.get("num_last_images_to_include")
    if paths and count is not None:
        raise NestedToolError(
            "image_gen__imagegen: pass referenced_image_paths or num_last_images_to_include, not both"
        )
    if len(paths) > MAX_EDIT_IMAGES:
        raise NestedToolError(f"image_gen__imagegen: referenced_image_paths takes at most {MAX_EDIT_IMAGES} paths")
    if count is not None:
        if not 1 <= count <= MAX_EDIT_IMAGES:
            raise NestedToolError(f"image_gen__imagegen: num_last_images_to_include must be 1 to {MAX_EDIT_IMAGES}")
        images = recent_images(history, count)
        if len(images) < count:
            raise NestedToolError(
                f"image_gen__imagegen: asked for the last {count} images, but the conversation has {len(images)}"
            )
        return images
    urls = []
    for path in paths:
        mime, data = await read_workspace_image(workspace, path, "image_gen__imagegen")
        urls.append(data_url(*await _fitted(mime, data, path)))
    return urls


async def _fitted(mime: str, data: bytes, path: str) -> tuple[str, bytes]:
    """A referenced image within the ``original`` limits, as nanocodex sends it (as it
    is without Pillow: the API bounds it then)."""
    from ._image_prepare import ImagePreparationError, PillowMissing, prepare

    try:
        return await trio.to_thread.run_sync(prepare, data, "original", abandon_on_cancel=True)
    except PillowMissing:
        return mime, data
    except ImagePreparationError as exc:
        raise NestedToolError(f"image_gen__imagegen: {path}: {exc}") from None


def _b64_image(response_body: bytes) -> str:
    try:
        decoded = json.loads(response_body)
    except ValueError as exc:
        raise NestedToolError(f"image generation returned a body that is not JSON: {exc}") from None
    data = decoded.get("data") if isinstance(decoded, dict) else None
    first = data[0] if isinstance(data, list) and data else None
    b64 = first.get("b64_json") if isinstance(first, dict) else None
    if not isinstance(b64, str) or not b64:
        raise NestedToolError("image generation returned no image data")
    return b64


def _component(value: str, fallback: str) -> str:
    cleaned = "".join(c if (c.isascii() and c.isalnum()) or c in "-_" else "_" for c in value)
    return cleaned or fallback


async def save_generated(workspace: Path, session_id: str, call_id: str, data: bytes) -> Path:
    """Write ``data`` to a new file ``generated_images/<session>/<call>[-n].png`` of the
    workspace (never an existing one); ``OSError`` if it cannot."""
    session = _component(session_id, "session")
    stem = _component(call_id, "generated_image")
    name = await trio.to_thread.run_sync(_save_beneath, workspace, session, stem, data)
    return Path(workspace) / GENERATED_DIR / session / name


def _save_beneath(workspace: Path, session: str, stem: str, data: bytes) -> str:
    """The name of the new file holding ``data``. The folders are walked (and made)
    beneath the workspace without following a link, and the file created without
    following one either: the tool runs outside the sandbox, and a command may have
    planted ``generated_images`` as a link to anywhere (``OSError`` then)."""
    try:
        with Beneath(workspace) as fs:
            folder = fs.open_dir((GENERATED_DIR, session), create=True)
    except Changed as exc:
        raise NotADirectoryError(errno.ENOTDIR, str(exc)) from None
    try:
        for attempt in range(1, _MAX_NAME_TRIES + 1):
            name = f"{stem}.png" if attempt == 1 else f"{stem}-{attempt}.png"
            try:
                fd = os.open(name, _CREATE, 0o666, dir_fd=folder)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            return name
    finally:
        os.close(folder)
    raise FileExistsError(f"{GENERATED_DIR}/{session} already holds {_MAX_NAME_TRIES} images named {stem}")


def output_hint(path: Path) -> str | None:
    """What the model is told about a saved image (None if that would be over 1 KiB)."""
    hint = (
        f"The generated image was saved to {path} (generated images go to {path.parent}).\n"
        "To use it at another path, copy it there and keep this file unless the user asks to delete it.\n"
        "The image already appears in this tool result: the final answer need not embed it as a "
        "Markdown image or link to the file."
    )
    return hint if len(hint.encode()) <= MAX_HINT_BYTES else None


async def run_image_generation(
    remote: RemoteApi, arguments: object, workspace: Path, history: Iterable[Mapping[str, Any]],
    call_id: str = "generated_image",
) -> dict[str, str]:
    try:
        args = _imagegen_shape().validate(arguments)
    except InvalidToolArguments as exc:
        raise NestedToolError(f"invalid arguments for image_gen__imagegen: {exc}") from None
    assert isinstance(args, dict)
    images = await _edit_images(args, workspace, history)
    body: dict[str, Any] = {}
    if images:
        body["images"] = [{"image_url": url} for url in images]
    body.update(prompt=args["prompt"], background="auto", model=IMAGE_MODEL, quality="auto", size="auto")
    path = "/images/edits" if images else "/images/generations"
    operation = "image edit" if images else "image generation"
    with trio.move_on_after(IMAGE_TIMEOUT) as scope:
        try:
            response = await remote.post_json(path, body, limit=MAX_RESPONSE_BYTES)
        except RemoteError as exc:
            raise NestedToolError(f"{operation} failed: {exc}") from None
    if scope.cancelled_caught:
        raise NestedToolError(f"{operation} timed out after {IMAGE_TIMEOUT:g} seconds")
    if not 200 <= response.status < 300:
        raise NestedToolError(f"{operation} returned HTTP {response.status}: {response.preview()}")
    b64 = _b64_image(response.body)
    result = {"type": "input_image", "image_url": f"data:image/png;base64,{b64}"}
    try:
        saved = await save_generated(workspace, remote.session_id, call_id, base64.b64decode(b64))
    except (OSError, binascii.Error, ValueError):
        return result  # nanocodex: the image still comes back, without a hint
    hint = output_hint(saved)
    return result if hint is None else {**result, "output_hint": hint}
