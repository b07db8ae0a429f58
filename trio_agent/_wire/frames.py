"""Server frames as plain values, checked field by field by hand.

``parse_frame`` takes the decoded JSON object of one WebSocket message (or SSE
``data:``) and returns a frame value; unknown ``type``s become ``UnknownFrame`` and
are skipped by the state machine, so new server events never break a turn.

A known frame is read strictly: a field of the wrong type (``null`` for a string,
``"false"`` or ``0`` for a bool, ``1.0`` or ``true`` for an int, a list where an
object belongs) or a missing required field is a ``ProtocolError``, never a value to
guess at. Extra keys are ignored, so the server can add fields. These are the rules
the cattrs converter applied when it structured frames (``tests/wire/test_frame_corpus.py``
holds them case by case); reading the few fields by hand costs a fraction of its
dispatch, and neither attrs nor cattrs is needed to run a turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .._errors import ProtocolError
from .._json_lines import MAX_DEPTH, too_deep
from .._record import Record

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


class ResponseRef(Record):
    __slots__ = ("id",)
    __match_args__ = ("id",)

    def __init__(self, id: str | None = None) -> None:
        self.id = id


_NO_RESPONSE = ResponseRef()


class ResponseCreated(Record):
    __slots__ = ("response",)
    __match_args__ = ("response",)

    def __init__(self, response: ResponseRef = _NO_RESPONSE) -> None:
        self.response = response


class OutputItemAdded(Record):
    __slots__ = ("item", "output_index")
    __match_args__ = ("item", "output_index")

    def __init__(self, item: dict[str, Any], output_index: int = 0) -> None:
        self.item = item
        self.output_index = output_index


class OutputTextDelta(Record):
    __slots__ = ("delta", "output_index", "content_index", "item_id")  # noqa: RUF023  # field order
    __match_args__ = ("delta", "output_index", "content_index", "item_id")

    def __init__(self, delta: str = "", output_index: int = 0, content_index: int = 0,
                 item_id: str | None = None) -> None:
        self.delta = delta
        self.output_index = output_index
        self.content_index = content_index
        self.item_id = item_id


class ReasoningSummaryDelta(Record):
    __slots__ = ("delta",)
    __match_args__ = ("delta",)

    def __init__(self, delta: str = "") -> None:
        self.delta = delta


class OutputItemDone(Record):
    __slots__ = ("item", "output_index")
    __match_args__ = ("item", "output_index")

    def __init__(self, item: dict[str, Any], output_index: int = 0) -> None:
        self.item = item
        self.output_index = output_index


class CompletedResponse(Record):
    __slots__ = ("id", "status", "end_turn", "output", "usage")  # noqa: RUF023  # field order
    __match_args__ = ("id", "status", "end_turn", "output", "usage")

    def __init__(self, id: str | None = None, status: str | None = None, end_turn: bool | None = None,
                 output: list[dict[str, Any]] | None = None, usage: dict[str, Any] | None = None) -> None:
        self.id = id
        self.status = status
        self.end_turn = end_turn
        self.output = output
        self.usage = usage


class ResponseCompleted(Record):
    __slots__ = ("response",)
    __match_args__ = ("response",)

    def __init__(self, response: CompletedResponse) -> None:
        self.response = response


class ResponseFailed(Record):
    __slots__ = ("raw",)
    __match_args__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw


class ResponseIncomplete(Record):
    __slots__ = ("raw",)
    __match_args__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw


class ErrorFrame(Record):
    __slots__ = ("raw",)
    __match_args__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw


class ResponseMetadata(Record):
    __slots__ = ("headers",)
    __match_args__ = ("headers",)

    def __init__(self, headers: dict[str, Any] | None = None) -> None:
        self.headers: dict[str, Any] = {} if headers is None else headers


class UnknownFrame(Record):
    __slots__ = ("type", "raw")  # noqa: RUF023  # field order
    __match_args__ = ("type", "raw")

    def __init__(self, type: str, raw: dict[str, Any]) -> None:
        self.type = type
        self.raw = raw


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


# -- reading fields --------------------------------------------------------------------
# Each reader takes the frame (or its nested object) and a key, and returns the value
# or raises ``ValueError`` naming the field. A key that is absent takes the field's
# default; a ``null`` is a value like any other (allowed only where the field is optional).


def _wrong(key: str, expected: str, value: object) -> ValueError:
    return ValueError(f"{key!r}: expected {expected}, got {type(value).__name__}")


def _str(raw: dict[str, Any], key: str) -> str:
    value = raw.get(key, "")
    if type(value) is str:
        return value
    raise _wrong(key, "a string", value)


def _int(raw: dict[str, Any], key: str) -> int:
    value = raw.get(key, 0)
    if type(value) is int:  # a bool is not an int here, nor is 1.0
        return value
    raise _wrong(key, "an integer", value)


def _str_or_none(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is None or type(value) is str:
        return value
    raise _wrong(key, "a string or null", value)


def _bool_or_none(raw: dict[str, Any], key: str) -> bool | None:
    value = raw.get(key)
    if value is None or type(value) is bool:
        return value
    raise _wrong(key, "a boolean or null", value)


def _nested(raw: dict[str, Any], key: str) -> dict[str, Any]:
    """A required object field, as it is (a nested response, read for a few fields)."""
    if key not in raw:
        raise ValueError(f"{key!r} is missing")
    value = raw[key]
    if isinstance(value, dict):
        return value
    raise _wrong(key, "an object", value)


def _object(raw: dict[str, Any], key: str) -> dict[str, Any]:
    """A required object field, as a new dict (what it holds is shared)."""
    return dict(_nested(raw, key))


def _object_or_none(raw: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, dict):
        return dict(value)
    raise _wrong(key, "an object or null", value)


def _objects_or_none(raw: dict[str, Any], key: str) -> list[dict[str, Any]] | None:
    """A list of objects (a new list of new dicts), or None."""
    value = raw.get(key)
    if value is None:
        return None
    if type(value) is list:
        for element in value:
            if not isinstance(element, dict):
                raise _wrong(f"{key}[]", "an object", element)
        return list(map(dict, value))  # (no comprehension: one code object less per response)
    if value == "" or value == {}:
        # The converter iterated whatever it was given: an empty string or object made
        # an empty list. Still accepted, so that no frame it took fails a turn now.
        return []
    raise _wrong(key, "a list of objects or null", value)


# -- one reader a frame type -----------------------------------------------------------


def _created(raw: dict[str, Any]) -> ResponseCreated:
    if "response" not in raw:
        return ResponseCreated()
    return ResponseCreated(ResponseRef(_str_or_none(_nested(raw, "response"), "id")))


def _item_added(raw: dict[str, Any]) -> OutputItemAdded:
    return OutputItemAdded(_object(raw, "item"), _int(raw, "output_index"))


def _text_delta(raw: dict[str, Any]) -> OutputTextDelta:
    return OutputTextDelta(
        _str(raw, "delta"), _int(raw, "output_index"), _int(raw, "content_index"), _str_or_none(raw, "item_id")
    )


def _reasoning_delta(raw: dict[str, Any]) -> ReasoningSummaryDelta:
    return ReasoningSummaryDelta(_str(raw, "delta"))


def _item_done(raw: dict[str, Any]) -> OutputItemDone:
    return OutputItemDone(_object(raw, "item"), _int(raw, "output_index"))


def _completed(raw: dict[str, Any]) -> ResponseCompleted:
    response = _nested(raw, "response")
    return ResponseCompleted(
        CompletedResponse(
            _str_or_none(response, "id"),
            _str_or_none(response, "status"),
            _bool_or_none(response, "end_turn"),
            _objects_or_none(response, "output"),
            _object_or_none(response, "usage"),
        )
    )


def _metadata(raw: dict[str, Any]) -> ResponseMetadata:
    if "headers" not in raw:
        return ResponseMetadata()
    return ResponseMetadata(_object(raw, "headers"))


# Frames read field by field.
_READERS: dict[str, Callable[[dict[str, Any]], Frame]] = {
    "response.created": _created,
    "response.in_progress": _created,
    "response.output_item.added": _item_added,
    "response.output_text.delta": _text_delta,
    "response.reasoning_summary_text.delta": _reasoning_delta,
    "response.reasoning_summary.delta": _reasoning_delta,
    "response.output_item.done": _item_done,
    "response.completed": _completed,
    "response.metadata": _metadata,
}
# Frames kept whole: their meaning is in nested, loosely specified fields.
_RAW: dict[str, Callable[[dict[str, Any]], Frame]] = {
    "response.failed": ResponseFailed,
    "response.incomplete": ResponseIncomplete,
    "error": ErrorFrame,
}


def parse_frame(raw: dict[str, Any]) -> Frame:
    """Turn one decoded server frame into a frame value (``ProtocolError`` if malformed)."""
    kind = raw.get("type")
    if kind is None and isinstance(raw.get("error"), dict):
        return ErrorFrame(raw)  # an error with no frame type (llama-stack's in-stream errors)
    if not isinstance(kind, str):
        raise ProtocolError(
            f"Responses frame without a string 'type': {_excerpt(raw)}", event=raw
        )
    reader = _READERS.get(kind)
    if reader is not None:
        try:
            return reader(raw)
        except ValueError as exc:
            raise ProtocolError(
                f"malformed {kind!r} frame: {_excerpt(raw)}", event=raw
            ) from exc
    keep = _RAW.get(kind)
    if keep is not None:
        return keep(raw)
    return UnknownFrame(kind, raw)


TEXT_DELTA = "response.output_text.delta"


def text_delta_fields(raw: dict[str, Any]) -> tuple[str, int, str | None] | None:
    """``delta``, ``output_index`` and ``item_id`` of a well-formed text delta frame,
    read without building a frame (most frames of an answer are deltas); None when a field
    has a type ``parse_frame`` would refuse, so that frame takes the general path and
    fails there with the same ``ProtocolError``. The defaults are ``OutputTextDelta``'s."""
    item_id = raw.get("item_id")
    try:  # the fields the API always sends, by subscript (no call per field)
        delta, output_index, content_index = raw["delta"], raw["output_index"], raw["content_index"]
    except KeyError:
        delta, output_index = raw.get("delta", ""), raw.get("output_index", 0)
        content_index = raw.get("content_index", 0)
    if (
        type(delta) is not str
        or type(output_index) is not int
        or type(content_index) is not int
        or (item_id is not None and type(item_id) is not str)
    ):
        return None
    return delta, output_index, item_id


def decode_frame(text: str | bytes) -> dict[str, Any]:
    """Decode one message's JSON text into a dict (``ProtocolError`` otherwise)."""
    # ``type(x) is``, not ``isinstance``: no call on the per-frame path (JSON text is a
    # plain str, its decoded object a plain dict, its ``type`` a plain str).
    if type(text) is not str and isinstance(text, bytes):
        raise ProtocolError(
            "the Responses WebSocket sent a binary frame; only JSON text frames are expected",
            error_class="unexpected_binary",
        )
    try:
        # A lone JSON object (what servers send) is scanned at once (what ``decode`` ends
        # in, without its two whitespace matches); anything else, malformed JSON too, goes
        # through ``decode`` (the same result, the same errors).
        try:
            value, end = _SCAN(text, 0) if text[:1] == "{" else _UNSCANNED
        except StopIteration:
            end = -1
        if end != len(text):
            value = _DECODER.decode(text)
    except ValueError as exc:
        raise ProtocolError(
            f"the Responses server sent a frame that is not JSON: {text[:200]!r}",
            error_class="invalid_json",
        ) from exc
    except RecursionError:
        raise ProtocolError(
            "the Responses server sent a frame nested too deeply for a JSON reader "
            f"(it starts {text[:80]!r})", error_class="invalid_json",
        ) from None
    if type(value) is not dict:
        raise ProtocolError(
            f"the Responses server sent a JSON {type(value).__name__}, expected an object",
            error_class="invalid_payload",
        )
    frame_type = value.get("type")  # server data: compared, never hashed (a list would not hash)
    if (frame_type == _ITEM_DONE or frame_type == _COMPLETED) and text.count("{") + text.count("[") > FRAME_DEPTH \
            and too_deep(value, FRAME_DEPTH):
        raise ProtocolError(
            f"the Responses server sent a {value['type']} frame nesting arrays and objects deeper than "
            f"{FRAME_DEPTH} levels; its items could not be kept in a session (rollouts refuse lines deeper "
            f"than {MAX_DEPTH})", error_class="invalid_payload",
        )
    return value


# Frames whose items are committed to history (and so to the rollout and snapshots,
# whose readers refuse nesting deeper than ``_json_lines.MAX_DEPTH``, as codex's
# serde_json does): one deeper than FRAME_DEPTH fails its response rather than
# committing what could never be loaded again. Only these are walked: a delta or
# ``response.created`` is not kept, and the walk stays off the per-delta path. Nor is a
# committing frame walked when its text holds at most FRAME_DEPTH opening brackets: every
# level of nesting opens with one, so such a frame cannot be too deep (two ``str.count``
# in C instead of a walk in Python over every node of the decoded frame).
FRAME_DEPTH = 100
_ITEM_DONE, _COMPLETED = "response.output_item.done", "response.completed"


def _not_json(constant: str) -> Any:
    # ``NaN``/``Infinity`` are not JSON (RFC 8259); a frame holding one is refused.
    raise ValueError(f"{constant} is not a JSON value")


# One decoder for every frame (``json.loads(text, parse_constant=...)`` would build one,
# and its scanner, per call); ``scan_once`` is what its ``raw_decode`` calls (untyped):
# (value, end), or StopIteration.
_DECODER = json.JSONDecoder(parse_constant=_not_json)
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_UNSCANNED: tuple[Any, int] = (None, -1)


def _excerpt(raw: dict[str, Any]) -> str:
    text = json.dumps(raw, separators=(",", ":"))
    return text if len(text) <= 300 else text[:300] + "..."
