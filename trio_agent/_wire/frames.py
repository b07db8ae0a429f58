"""Server frames as attrs values, parsed through the one cattrs converter.

``parse_frame`` takes the decoded JSON object of one WebSocket message (or SSE
``data:``) and returns a frame value; unknown ``type``s become ``UnknownFrame`` and
are skipped by the state machine, so new server events never break a turn.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import cattrs

from .._errors import ProtocolError
from .._json import converter

__all__ = [
    "CompletedResponse",
    "ErrorFrame",
    "Frame",
    "OutputItemAdded",
    "OutputItemDone",
    "OutputTextDelta",
    "ReasoningSummaryDelta",
    "ResponseCompleted",
    "ResponseCreated",
    "ResponseFailed",
    "ResponseIncomplete",
    "ResponseMetadata",
    "ResponseRef",
    "UnknownFrame",
    "decode_frame",
    "parse_frame",
    "text_delta_fields",
]


@attrs.frozen
class ResponseRef:
    id: str | None = None


@attrs.frozen
class ResponseCreated:
    response: ResponseRef = ResponseRef()


@attrs.frozen
class OutputItemAdded:
    item: dict[str, Any]
    output_index: int = 0


@attrs.frozen
class OutputTextDelta:
    delta: str = ""
    output_index: int = 0
    content_index: int = 0
    item_id: str | None = None


@attrs.frozen
class ReasoningSummaryDelta:
    delta: str = ""


@attrs.frozen
class OutputItemDone:
    item: dict[str, Any]
    output_index: int = 0


@attrs.frozen
class CompletedResponse:
    id: str | None = None
    status: str | None = None
    end_turn: bool | None = None
    output: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None


@attrs.frozen
class ResponseCompleted:
    response: CompletedResponse


@attrs.frozen
class ResponseFailed:
    raw: dict[str, Any]


@attrs.frozen
class ResponseIncomplete:
    raw: dict[str, Any]


@attrs.frozen
class ErrorFrame:
    raw: dict[str, Any]


@attrs.frozen
class ResponseMetadata:
    headers: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class UnknownFrame:
    type: str
    raw: dict[str, Any]


Frame = (
    ResponseCreated
    | OutputItemAdded
    | OutputTextDelta
    | ReasoningSummaryDelta
    | OutputItemDone
    | ResponseCompleted
    | ResponseFailed
    | ResponseIncomplete
    | ErrorFrame
    | ResponseMetadata
    | UnknownFrame
)

# Frames structured from their fields by the converter.
_STRUCTURED: dict[str, type] = {
    "response.created": ResponseCreated,
    "response.in_progress": ResponseCreated,
    "response.output_item.added": OutputItemAdded,
    "response.output_text.delta": OutputTextDelta,
    "response.reasoning_summary_text.delta": ReasoningSummaryDelta,
    "response.reasoning_summary.delta": ReasoningSummaryDelta,
    "response.output_item.done": OutputItemDone,
    "response.completed": ResponseCompleted,
    "response.metadata": ResponseMetadata,
}
# Frames kept whole: their meaning is in nested, loosely specified fields.
_RAW: dict[str, type] = {
    "response.failed": ResponseFailed,
    "response.incomplete": ResponseIncomplete,
    "error": ErrorFrame,
}


def parse_frame(raw: dict[str, Any]) -> Frame:
    """Turn one decoded server frame into a frame value (``ProtocolError`` if malformed)."""
    kind = raw.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(
            f"Responses frame without a string 'type': {_excerpt(raw)}", event=raw
        )
    cls = _STRUCTURED.get(kind)
    if cls is not None:
        try:
            frame: Frame = converter.structure(raw, cls)
            return frame
        except (cattrs.BaseValidationError, TypeError, ValueError, KeyError) as exc:
            raise ProtocolError(
                f"malformed {kind!r} frame: {_excerpt(raw)}", event=raw
            ) from exc
    raw_cls = _RAW.get(kind)
    if raw_cls is not None:
        return raw_cls(raw)  # type: ignore[no-any-return]
    return UnknownFrame(kind, raw)


TEXT_DELTA = "response.output_text.delta"


def text_delta_fields(raw: dict[str, Any]) -> tuple[str, int, str | None] | None:
    """``delta``, ``output_index`` and ``item_id`` of a well-formed text delta frame,
    read without the converter (most frames of an answer are deltas); None when a field
    has a type ``parse_frame`` would refuse, so that frame takes the general path and
    fails there with the same ``ProtocolError``. The defaults are ``OutputTextDelta``'s."""
    delta = raw.get("delta", "")
    output_index = raw.get("output_index", 0)
    item_id = raw.get("item_id")
    if (
        type(delta) is not str
        or type(output_index) is not int
        or type(raw.get("content_index", 0)) is not int
        or (item_id is not None and type(item_id) is not str)
    ):
        return None
    return delta, output_index, item_id


def decode_frame(text: str | bytes) -> dict[str, Any]:
    """Decode one message's JSON text into a dict (``ProtocolError`` otherwise)."""
    if isinstance(text, bytes):
        raise ProtocolError(
            "the Responses WebSocket sent a binary frame; only JSON text frames are expected",
            error_class="unexpected_binary",
        )
    try:
        value = _DECODER.decode(text)
    except ValueError as exc:
        raise ProtocolError(
            f"the Responses server sent a frame that is not JSON: {text[:200]!r}",
            error_class="invalid_json",
        ) from exc
    if not isinstance(value, dict):
        raise ProtocolError(
            f"the Responses server sent a JSON {type(value).__name__}, expected an object",
            error_class="invalid_payload",
        )
    return value


def _not_json(constant: str) -> Any:
    # ``NaN``/``Infinity`` are not JSON (RFC 8259); a frame holding one is refused.
    raise ValueError(f"{constant} is not a JSON value")


# One decoder for every frame: ``json.loads(text, parse_constant=...)`` would build a
# new ``JSONDecoder`` (and its scanner) per call, on the per-frame path. ``decode`` is
# what ``json.loads`` calls on a str; it keeps no state between calls.
_DECODER = json.JSONDecoder(parse_constant=_not_json)


def _excerpt(raw: dict[str, Any]) -> str:
    text = json.dumps(raw, separators=(",", ":"))
    return text if len(text) <= 300 else text[:300] + "..."
