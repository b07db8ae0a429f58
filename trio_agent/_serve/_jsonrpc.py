"""JSON-RPC 2.0 messages as the Codex app-server speaks them: parsing and encoding (pure).

One message is one JSON object. ``parse`` sorts an incoming text into a ``Request``
(``id`` and ``method``), a ``Notification`` (``method``, no ``id``), a ``Response``
(``id`` and ``result``), an ``ErrorResponse`` (``id`` and ``error``) or ``Malformed``
(with the request ``id`` when one could be read, so the caller can still answer it).
The ``jsonrpc`` member is optional on input (codex does not require it) and must be
``"2.0"`` when present; the server always writes it.

What ``parse`` refuses (never raising, whatever the text): text that is not JSON
(``-32700``), including what strict JSON does not have -- ``NaN``, ``Infinity`` and
numbers too large for a float (``1e999``) or an integer (more than Python's 4300 digits)
-- and values nested more than ``MAX_DEPTH`` (128) arrays/objects deep, the limit
codex's own parser (serde_json) has; beyond it every later step (a ``repr``, encoding
an echo, the model's request body) could hit Python's recursion limit, so it is refused
at the door, with the request's id when the top level was readable. A duplicated key
keeps its last value (as serde_json's maps do). Values in error messages are shown
abbreviated (``shown``).

Encoded text never contains a raw line break: JSON escapes ``\\n`` and ``\\r``, and
U+2028, U+2029 and U+0085 (which ``str.splitlines`` and JavaScript treat as line ends)
are escaped too, so newline-delimited framing is safe for any reader.
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs

from .._jsontext import EncodedList, dumps, scrub_surrogates

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "ErrorResponse",
    "InvalidParams",
    "InvalidRequest",
    "Malformed",
    "Message",
    "MethodNotFound",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "RpcError",
    "SharedText",
    "encode",
    "encode_shared",
    "encode_value",
    "error_message",
    "notification_message",
    "notification_text",
    "parse",
    "request_message",
    "response_message",
    "shown",
]

MAX_DEPTH = 128  # nested arrays/objects in one message (serde_json's recursion limit)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

RequestId = int | str
JsonObject = dict[str, Any]
_encode_string = json.encoder.encode_basestring  # what JSONEncoder(ensure_ascii=False) uses for a str
_LINE_BREAKS = (("\u2028", "\\u2028"), ("\u2029", "\\u2029"), ("\u0085", "\\u0085"))


def _not_json(value: Any) -> Any:
    """``JSONEncoder.default``'s refusal (``_encoder``'s ``default``)."""
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


# The C encoder ``_jsontext.dumps``' ``JSONEncoder(separators=(",", ":"), ensure_ascii=False)``
# makes on every call (``JSONEncoder.encode`` -> ``iterencode``: ~1.3 us of Python around the
# C work, per message of every turn -- issue 30), made once: the same arguments, the same
# text. Without circular-reference markers (a fresh dict per call would be needed: a call
# that failed midway leaves its ids behind): the server's messages are trees it builds; a
# cycle, a bug, fails with RecursionError (a ValueError before) -- either way the caller's
# ``except Exception`` reports it.
_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)  # (None without the _json module)
_encoder: Any = (_make_encoder(None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, True)
                 if _make_encoder is not None else None)


class RpcError(Exception):
    """An error answered to a request: ``code``, ``message`` (and optional ``data``)."""

    code = INTERNAL_ERROR

    def __init__(self, message: str, *, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.data = data


class InvalidRequest(RpcError):
    """-32600: the request cannot be served as asked (unknown thread, wrong state...)."""

    code = INVALID_REQUEST


class MethodNotFound(RpcError):
    code = METHOD_NOT_FOUND


class InvalidParams(RpcError):
    """-32602: the params do not have the shape the method needs."""

    code = INVALID_PARAMS


@attrs.frozen
class Request:
    id: RequestId
    method: str
    params: Any


@attrs.frozen
class Notification:
    method: str
    params: Any


@attrs.frozen
class Response:
    id: RequestId
    result: Any


@attrs.frozen
class ErrorResponse:
    id: RequestId | None
    code: int
    message: str
    data: Any = None


@attrs.frozen
class Malformed:
    """Text that is not a JSON-RPC message; ``id`` when the request id was readable."""

    reason: str
    id: RequestId | None = None
    code: int = INVALID_REQUEST


Message = Request | Notification | Response | ErrorResponse | Malformed


def shown(value: object, limit: int = 80) -> str:
    """A short JSON-ish rendering of a wrong value for an error message."""
    text = "null" if value is None else "true" if value is True else "false" if value is False else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"the number {shown(text, 40)} is out of range")
    return value


_decode = json.JSONDecoder(parse_float=_finite_float, parse_constant=_not_json_constant).decode


def _deeper_than(value: object, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` arrays/objects (iterative: no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


class _TooDeep(ValueError):
    def __init__(self, raw: object) -> None:
        super().__init__(f"it nests arrays/objects more than {MAX_DEPTH} deep")
        self.raw = raw


def _load(text: str) -> object:
    """``json.loads`` for a client's text; ``ValueError`` saying why it is refused."""
    try:
        raw = _decode(text)
    except RecursionError:
        raise ValueError(f"it nests arrays/objects more than {MAX_DEPTH} deep") from None
    # Every nesting level needs a bracket: most messages have too few to be worth a walk.
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(raw, MAX_DEPTH):
        raise _TooDeep(raw)
    return raw


def _request_id(value: object) -> RequestId | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | str):
        return value
    return None


def parse(text: str) -> Message:
    """Sort one incoming JSON text into a message (never raises)."""
    try:
        raw = _load(text)
    except _TooDeep as exc:
        top = _request_id(exc.raw.get("id")) if isinstance(exc.raw, dict) else None
        return Malformed(f"the message is refused: {exc}", top, code=PARSE_ERROR)
    except ValueError as exc:  # not JSON, NaN/Infinity, a number out of range, too deep to decode
        return Malformed(f"the line is not JSON ({exc})", code=PARSE_ERROR)
    if not isinstance(raw, dict):
        return Malformed(f"a JSON-RPC message is a JSON object, got {type(raw).__name__}")
    has_id = "id" in raw
    request_id = _request_id(raw.get("id"))
    version = raw.get("jsonrpc", "2.0")
    if version != "2.0":
        return Malformed(f'"jsonrpc" must be "2.0", got {shown(version)}', request_id)
    if has_id and request_id is None:
        return Malformed(f"the id must be a string or an integer, got {shown(raw.get('id'))}")
    method = raw.get("method")
    if method is not None:
        if not isinstance(method, str) or not method:
            return Malformed(f"the method must be a non-empty string, got {shown(method)}", request_id)
        params = raw.get("params")
        if request_id is None:
            return Notification(method, params)
        return Request(request_id, method, params)
    if request_id is not None and "result" in raw:
        return Response(request_id, raw["result"])
    if request_id is not None and isinstance(raw.get("error"), dict):
        error = raw["error"]
        code = error.get("code")
        message = error.get("message")
        return ErrorResponse(
            request_id, code if isinstance(code, int) else INTERNAL_ERROR,
            message if isinstance(message, str) else "", error.get("data"),
        )
    return Malformed('a message needs a "method" (request or notification) or an "id" with "result" or '
                     '"error" (response)', request_id)


def encode(message: JsonObject) -> str:
    """Compact JSON text for one message, with no raw line break in it."""
    return encode_value(message)


def encode_value(value: Any) -> str:
    """``encode`` for any JSON value (a part of a message, spliced in by ``notification_text``)."""
    if _encoder is None or type(value) is str or (type(value) is dict and type(value.get("input")) is EncodedList):
        text = dumps(value)  # (a string: JSONEncoder.encode's own branch; a replay body: dumps' splice)
    else:
        text = "".join(_encoder(value, 0))
        if text.isascii():  # no lone surrogate, none of _LINE_BREAKS (what most messages are)
            return text
        text = scrub_surrogates(text)
    for char, escaped in _LINE_BREAKS:
        if char in text:
            text = text.replace(char, escaped)
    return text


def string_text(text: str) -> str:
    """``encode_value(text)`` for a string (a text delta's): ASCII text, which has no lone
    surrogate and none of ``_LINE_BREAKS``, goes straight to the C encoder
    ``json.dumps`` uses for a string (``ensure_ascii=False``), the same bytes."""
    if text.isascii():
        return _encode_string(text)
    return encode_value(text)


def notification_text(method: str, params_text: str, emitted_at_ms: int) -> str:
    """``encode(notification_message(method, params, emitted_at_ms=...))`` -- the same
    text -- from ``params`` already encoded (``params_text``). The part before the
    params is built once per method (a text delta's, ten and more a turn, was encoded
    each time; the methods are the server's own few names)."""
    head = _HEADS.get(method)
    if head is None:
        head = _HEADS[method] = f'{{"jsonrpc":"2.0","method":{encode_value(method)},"params":'
    return f'{head}{params_text},"emittedAtMs":{emitted_at_ms}}}'


_HEADS: dict[str, str] = {}


class SharedText(str):
    """An encoded message queued for several connections (a notification to a thread's
    subscribers or to every client). Its wire bytes -- a WebSocket text frame, a stdio
    line -- are built by the first connection that writes it and reused by the others
    (``_ws_writes.text_frames``, ``_channel.LineChannel``), so a message costs one
    UTF-8 encoding and one framing however many clients receive it (issue 30)."""

    frame: bytes | None = None  # the WebSocket text frame, once built
    line: bytes | None = None  # the stdio line (with its newline), once built


def encode_shared(message: JsonObject) -> SharedText:
    """``encode`` for a message sent to more than one connection."""
    return SharedText(encode(message))


def response_message(request_id: RequestId, result: Any) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId, error: RpcError) -> JsonObject:
    body: JsonObject = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def notification_message(method: str, params: Any, *, emitted_at_ms: int | None = None) -> JsonObject:
    message: JsonObject = {"jsonrpc": "2.0", "method": method, "params": params}
    if emitted_at_ms is not None:
        message["emittedAtMs"] = emitted_at_ms
    return message


def request_message(request_id: RequestId, method: str, params: Any) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
