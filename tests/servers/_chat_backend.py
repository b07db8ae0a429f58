"""A scripted OpenAI Chat Completions server on 127.0.0.1: the model behind the
third-party Responses servers under test.

It is a real HTTP/1.1 server (the standard library's, one thread per connection, in a
daemon thread of the test process) answering ``POST /v1/chat/completions`` streamed
(server-sent events: ``data: {chunk}`` lines, then ``data: [DONE]``) or as one JSON
body, whichever the request asks for. A test gives it a script -- the answers of the
next chat requests, in order (``call(name, arguments)``: an assistant message with
``tool_calls``; ``say(text)``: a text answer) -- and reads back every request body it
received (``requests``). A request beyond the script is answered 500 with a message
saying so, and recorded as well, so a test sees how far its script got.

One backend serves a whole test session (the servers in front of it are configured
with its address once, when they start); tests in one session run one at a time, and
``script()`` starts a test's script afresh.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Answer", "ChatBackend", "call", "say"]


@dataclass(frozen=True)
class ToolCalls:
    calls: tuple[tuple[str, str], ...]  # (function name, arguments as a JSON text)


@dataclass(frozen=True)
class Text:
    text: str


Answer = ToolCalls | Text


def call(name: str, arguments: dict[str, Any], *more: tuple[str, dict[str, Any]]) -> ToolCalls:
    """An answer calling the function ``name`` with ``arguments`` (and ``more`` calls after it)."""
    return ToolCalls(tuple((n, json.dumps(a)) for n, a in ((name, arguments), *more)))


def say(text: str) -> Text:
    return Text(text)


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    script: list[Answer] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # "METHOD /path" of anything else asked
    ids: Iterator[int] = field(default_factory=itertools.count)


class ChatBackend:
    """Start with ``start()`` (binds a free port on 127.0.0.1), stop with ``close()``."""

    def __init__(self) -> None:
        self._state = _State()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- the test's side ---------------------------------------------------------------

    def script(self, *answers: Answer) -> None:
        """The answers of the next chat requests, in order; forgets earlier requests."""
        with self._state.lock:
            self._state.script = list(answers)
            self._state.requests = []
            self._state.other = []

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat request body received since ``script()``, in order."""
        with self._state.lock:
            return list(self._state.requests)

    @property
    def other_requests(self) -> list[str]:
        with self._state.lock:
            return list(self._state.other)

    @property
    def url(self) -> str:
        """The OpenAI-style base URL (``http://127.0.0.1:PORT/v1``)."""
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> None:
        handler = type("Handler", (_Handler,), {"state": self._state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="chat-backend", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            assert not self._thread.is_alive(), "the chat backend's thread did not stop"


class _Handler(BaseHTTPRequestHandler):
    state: _State
    protocol_version = "HTTP/1.1"  # keep-alive: bodies have a length or are chunked

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the tests read requests
        pass

    def do_GET(self) -> None:
        if self.path.split("?")[0].rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "backend-model", "object": "model",
                                                          "owned_by": "tests"}]})
        else:
            self._not_found()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
            self._not_found()
            return
        body: dict[str, Any] = json.loads(raw)
        with self.state.lock:
            self.state.requests.append(body)
            answer = self.state.script.pop(0) if self.state.script else None
            number = next(self.state.ids)
        if answer is None:
            self._json(500, {"error": {"message": "the chat backend's script has no answer for this request",
                                       "type": "server_error"}})
            return
        completion_id = f"chatcmpl-{number}"
        model = str(body.get("model", "backend-model"))
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(_chunks(answer, completion_id, model, number, include_usage))
        else:
            self._json(200, _completion(answer, completion_id, model, number))

    def _not_found(self) -> None:
        with self.state.lock:
            self.state.other.append(f"{self.command} {self.path}")
        self._json(404, {"error": {"message": f"no route {self.command} {self.path}", "type": "not_found"}})

    def _json(self, status: int, value: dict[str, Any]) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, chunks: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in [*(f"data: {json.dumps(c)}\n\n" for c in chunks), "data: [DONE]\n\n"]:
            data = event.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


_USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def _tool_call_id(number: int, index: int) -> str:
    return f"call_{number}_{index}"


def _completion(answer: Answer, completion_id: str, model: str, number: int) -> dict[str, Any]:
    message: dict[str, Any]
    if isinstance(answer, Text):
        message, finish = {"role": "assistant", "content": answer.text}, "stop"
    else:
        calls = [{"id": _tool_call_id(number, i), "type": "function", "function": {"name": n, "arguments": a}}
                 for i, (n, a) in enumerate(answer.calls)]
        message, finish = {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
    return {"id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": _USAGE}


def _chunks(answer: Answer, completion_id: str, model: str, number: int, include_usage: bool) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks: list[dict[str, Any]]
    if isinstance(answer, Text):
        words = answer.text.split(" ")
        pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
        chunks = [chunk({"role": "assistant", "content": ""})]
        chunks += [chunk({"content": piece}) for piece in pieces]
        chunks.append(chunk({}, "stop"))
    else:
        chunks = [chunk({"role": "assistant", "content": None})]
        for i, (name, arguments) in enumerate(answer.calls):
            chunks.append(chunk({"tool_calls": [{"index": i, "id": _tool_call_id(number, i), "type": "function",
                                                 "function": {"name": name, "arguments": ""}}]}))
            half = len(arguments) // 2  # the arguments in two pieces, as models stream them
            for piece in (arguments[:half], arguments[half:]):
                chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
        chunks.append(chunk({}, "tool_calls"))
    if include_usage:
        chunks.append({"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()),
                       "model": model, "choices": [], "usage": _USAGE})
    return chunks
