"""Where ``trio-agent exec`` writes its events.

``--json`` / ``--experimental-json``: every event as one JSON object per line on
stdout (``JsonlOutput``) and nothing else there -- the ``@openai/codex-sdk`` fails on
any line that is not JSON; notes go to stderr. Without it (``HumanOutput``) progress
goes to stderr as it happens (each command and its exit code, errors) and only the
final answer to stdout, as codex exec's default mode does, so ``trio-agent exec
"..." > answer.txt`` keeps just the answer.

Writes go through a Trio stream on a duplicate of descriptor 1, so a reader that is
slow to drain the pipe holds back the writer alone, never the event loop. A reader that
went away (a closed pipe) is ``OutputClosed`` once, at the write that found it; later
writes do nothing (exec then ends the turn: nobody is reading it).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Protocol

import trio

__all__ = ["HumanOutput", "JsonlOutput", "Output", "OutputClosed"]

Json = dict[str, Any]


_SEPARATORS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def _line_safe(text: str) -> str:
    """JSON text that every line reader sees as the lines it has: the characters that
    some readers (Python's ``splitlines``, JavaScript before ES2019) take for line breaks
    are written as JSON escapes. They, and a lone surrogate (which cannot be UTF-8; JSON
    from a hostile model may carry one, and ``backslashreplace`` writes its escape), can
    only be inside strings, where an escape means the same character."""
    return text.translate(_SEPARATORS)


class OutputClosed(Exception):
    """stdout's reader went away."""


class _Stdout:
    """``stream`` until a write finds it closed."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self._stream = stream
        self.closed = False

    async def send(self, text: str) -> None:
        if self.closed:
            await trio.lowlevel.checkpoint()
            return
        try:
            await self._stream.send_all(_line_safe(text).encode("utf-8", "backslashreplace"))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.closed = True
            raise OutputClosed("stdout was closed (its reader went away)") from None


class Output(Protocol):
    async def write(self, events: list[Json]) -> None: ...

    async def finish(self, final_message: str | None) -> None:
        """The turn is over (``final_message``: its last agent message, if it completed)."""
        ...


class JsonlOutput:
    """One JSON object per line on ``stream``."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self._stdout = _Stdout(stream)

    async def write(self, events: list[Json]) -> None:
        if events:
            await self._stdout.send("".join(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"
                                            for event in events))

    async def finish(self, final_message: str | None) -> None:
        await trio.lowlevel.checkpoint()


class HumanOutput:
    """Progress on stderr, the final answer on ``stream``."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self._stdout = _Stdout(stream)

    async def write(self, events: list[Json]) -> None:
        await trio.lowlevel.checkpoint()
        for event in events:
            line = _progress(event)
            if line:
                print(line, file=sys.stderr, flush=True)

    async def finish(self, final_message: str | None) -> None:
        if final_message:
            await self._stdout.send(final_message.rstrip("\n") + "\n")
        else:
            await trio.lowlevel.checkpoint()


def _progress(event: Json) -> str | None:
    kind, item = event.get("type"), event.get("item") or {}
    if kind == "thread.started":
        return f"thread {event.get('thread_id')}"
    if kind == "item.started" and item.get("type") == "command_execution":
        return f"$ {item.get('command')}"
    if kind == "item.completed" and item.get("type") == "command_execution":
        output, code = str(item.get("aggregated_output") or "").rstrip(), item.get("exit_code")
        return f"{output}\n(exit {code})" if output else f"(exit {code})"
    if kind == "item.completed" and item.get("type") in ("reasoning", "error"):
        return f"[{item['type']}] {item.get('text') or item.get('message')}"
    if kind == "item.completed" and item.get("type") == "file_change":
        changes = ", ".join(f"{change['kind']} {change['path']}" for change in item.get("changes") or [])
        return f"patch {item.get('status')}: {changes}"
    if kind == "error":
        return f"error: {event.get('message')}"
    if kind == "turn.failed":
        return f"turn failed: {(event.get('error') or {}).get('message')}"
    if kind == "turn.completed":
        usage = event.get("usage") or {}
        return f"tokens used: {usage.get('input_tokens', 0)} in, {usage.get('output_tokens', 0)} out"
    return None
