"""The JavaScript engine behind code mode, stepped synchronously.

Theory of operation (python-ecosystem.md A.0/A.6): JavaScript only runs inside a
host-initiated *step*: `start` (evaluate the cell), one batch of `run_jobs`
(promise jobs), `resolve`/`reject` (settle a host request), or one of the
bookkeeping reads. Each step is bounded by a CPU time limit; a script that
exceeds it (`while (true) {}`, also inside a promise continuation) makes the
step raise `EngineInterrupted`, which JavaScript cannot catch.

Host functions are pure-JS stubs from `_bootstrap.js`: a tool call or timer
pushes `{id, op, args}` into an outbox and returns a pending promise; the host
drains the outbox (`drain_outbox`), does the work in Trio and settles the
promise by id (`resolve` / `reject`). Python never registers callables into
JavaScript (quickjs-ng refuses to call Python while a time limit is set).

`Engine` is the small protocol the cell driver uses, so that another engine
(mini-racer, a Node subprocess) could be slotted in; `QuickJsEngine` is the
quickjs-ng implementation: one fresh `quickjs.Context` per cell, with memory,
stack and per-step CPU time limits. Steps block the calling thread (the Trio
thread) for at most the step time limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Literal, Protocol, TypeVar

import attrs
import quickjs  # type: ignore[import-untyped]  # ships no type information


class EngineError(Exception):
    """A step failed outside the script's control (out of memory, protocol error)."""


class EngineInterrupted(EngineError):
    """A step exceeded the CPU time limit and was interrupted (uncatchable in JS)."""


@attrs.frozen
class EngineLimits:
    """Resource limits of one engine instance.

    `step_time_limit` is CPU seconds per step, measured by QuickJS with C
    `clock()`, i.e. process-wide CPU time (other busy threads count too).
    """

    step_time_limit: float = 2.0
    memory_limit: int = 256 << 20
    stack_limit: int = 1 << 20


@attrs.frozen
class ToolSpec:
    """A nested tool as the cell sees it: `tools[js_name](...)` calls host tool `name`."""

    name: str
    description: str
    is_function: bool
    js_name: str

    @classmethod
    def from_tuple(cls, entry: tuple[str, str, bool]) -> ToolSpec:
        name, description, is_function = entry
        return cls(name, description, is_function, js_identifier(name))


def js_identifier(name: str) -> str:
    """Replace every character outside `[A-Za-z0-9_$]` with `_` (nanocodex 5.1)."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in "_$" else "_" for c in name)


@attrs.frozen
class HostRequest:
    """One queued host operation: `tool` (args `{name, input}`), `sleep` (args = ms)
    or `cancel` (id = the sleep request to cancel, args None)."""

    id: int
    op: str
    args: object


@attrs.frozen
class ContentOutput:
    """`text()` / `image()`: one `input_text` or `input_image` content item."""

    item: dict[str, object]


@attrs.frozen
class NotifyOutput:
    """`notify(v)`: the notification text."""

    text: str


@attrs.frozen
class YieldOutput:
    """`yield_control()` was called here."""


#: What `take_outputs` returns, in script order.
OutputEvent = ContentOutput | NotifyOutput | YieldOutput


@attrs.frozen
class Outcome:
    """How the cell's script settled, with the `store()` writes it made."""

    status: Literal["completed", "failed"]
    error: str | None
    stored: dict[str, object]


class Engine(Protocol):
    """One cell's JavaScript engine; every method is one synchronous step.

    Steps raise `EngineInterrupted` on the CPU time limit and `EngineError`
    on other engine failures; script exceptions are not raised, they settle
    the cell (`outcome()` becomes failed).
    """

    def start(
        self, source: str, tools: Sequence[ToolSpec], stored: Mapping[str, object]
    ) -> None:
        """Compile `source` as the body of an async function and start it."""

    def run_jobs(self, max_jobs: int) -> bool:
        """Run up to `max_jobs` pending promise jobs; True if more may be pending."""

    def drain_outbox(self) -> list[HostRequest]:
        """Take the host requests queued since the last drain."""

    def resolve(self, request_id: int, value: object) -> None:
        """Fulfil request `request_id` with a JSON value (TypeError/ValueError if not JSON)."""

    def reject(self, request_id: int, message: str) -> None:
        """Reject request `request_id` with `new Error(message)`."""

    def take_outputs(self) -> list[OutputEvent]:
        """Take the output events produced since the last call, in order."""

    def outcome(self) -> Outcome | None:
        """The settled result of the script, or None while it runs."""

    def close(self) -> None:
        """Release the engine; idempotent."""


EngineFactory = Callable[[EngineLimits], Engine]

_BOOTSTRAP = resources.files(__package__).joinpath("_bootstrap.js").read_text(encoding="utf-8")
_INTERRUPTED = "InternalError: interrupted"


class QuickJsEngine:
    """`Engine` on a fresh quickjs-ng context (see module docstring)."""

    def __init__(self, limits: EngineLimits) -> None:
        context = quickjs.Context()
        context.set_memory_limit(limits.memory_limit)
        context.set_max_stack_size(limits.stack_limit)
        context.set_time_limit(limits.step_time_limit)
        self._context: quickjs.Context | None = context
        self._entry = _step(context.eval, _BOOTSTRAP)

    def _call(self, op: str, a: object = None, b: object = None) -> object:
        if self._entry is None:
            raise EngineError("the engine is closed")
        return _step(self._entry, op, a, b)

    def start(
        self, source: str, tools: Sequence[ToolSpec], stored: Mapping[str, object]
    ) -> None:
        config = {"tools": [attrs.asdict(tool) for tool in tools], "stored": dict(stored)}
        self._call("start", source, json.dumps(config))

    def run_jobs(self, max_jobs: int) -> bool:
        context = self._context
        if context is None:
            raise EngineError("the engine is closed")
        for _ in range(max_jobs):
            if not _step(context.execute_pending_job):
                return False
        return True

    def drain_outbox(self) -> list[HostRequest]:
        return [_decode_request(entry) for entry in self._read_list("drain")]

    def resolve(self, request_id: int, value: object) -> None:
        self._call("resolve", request_id, json.dumps(value, allow_nan=False))

    def reject(self, request_id: int, message: str) -> None:
        self._call("reject", request_id, message)

    def take_outputs(self) -> list[OutputEvent]:
        return [_decode_output(event) for event in self._read_list("take")]

    def outcome(self) -> Outcome | None:
        state = self._read("state")
        if not isinstance(state, dict):
            raise EngineError("malformed code-mode state")
        status = state.get("status")
        if status == "running":
            return None
        stored = state.get("stored")
        if status not in ("completed", "failed") or not isinstance(stored, dict):
            raise EngineError("malformed code-mode state")
        error = state.get("error")
        return Outcome(status, None if error is None else str(error), stored)

    def close(self) -> None:
        self._entry = None
        self._context = None

    def _read(self, op: str) -> object:
        raw = self._call(op)
        try:
            value: object = json.loads(str(raw))
        except ValueError as exc:
            raise EngineError(f"malformed code-mode {op} payload: {exc}") from None
        return value

    def _read_list(self, op: str) -> list[object]:
        value = self._read(op)
        if not isinstance(value, list):
            raise EngineError(f"malformed code-mode {op} payload")
        return value


_T = TypeVar("_T")


def _step(function: Callable[..., _T], *args: object) -> _T:
    try:
        return function(*args)
    except quickjs.JSException as exc:
        message = str(exc).rstrip()
        if message.startswith(_INTERRUPTED):
            raise EngineInterrupted(message) from None
        raise EngineError(message) from None


def _decode_request(entry: object) -> HostRequest:
    if isinstance(entry, dict):
        request_id, op = entry.get("id"), entry.get("op")
        if isinstance(request_id, int) and isinstance(op, str):
            return HostRequest(request_id, op, entry.get("args"))
    raise EngineError(f"malformed code-mode host request: {entry!r}")


def _decode_output(event: object) -> OutputEvent:
    if isinstance(event, dict):
        kind = event.get("kind")
        if kind == "content" and isinstance(item := event.get("item"), dict):
            return ContentOutput(item)
        if kind == "notify" and isinstance(text := event.get("text"), str):
            return NotifyOutput(text)
        if kind == "yield":
            return YieldOutput()
    raise EngineError(f"malformed code-mode output event: {event!r}")


def quickjs_engine(limits: EngineLimits) -> Engine:
    """The default `EngineFactory`."""
    return QuickJsEngine(limits)
