"""One turn's tool items: ``tool.call``/``tool.progress``/``tool.result`` events to item
notifications (pure). ``_tool_items`` says which call is which item.

A command's item lives as long as the command does within the turn: an
``exec_command`` whose process is still running when the call returns leaves its
item open (``processId`` the session); each ``write_stdin`` to that session is an
``item/commandExecution/terminalInteraction`` (when it writes something) and its
output more ``item/commandExecution/outputDelta`` of the same item; the call that
sees the process exit completes the item with the exit code, the whole output
(``aggregatedOutput``, every call's output in order) and the time since the item
started. A failed ``write_stdin`` (its result is an error, not output) leaves the item
as it is. Whatever is still open when the turn ends is completed by ``TurnMapper``
with the output so far (``open_output``).

Output streams while a call waits (its ``tool.progress`` chunks); the part of a
call's output that was not streamed follows as one more delta before the call's
result is applied, so the deltas of an item add up to its ``aggregatedOutput``
whenever the streamed chunks are the start of the call's output (when they are not,
the result's output having been cut in the middle, ``item/completed`` has the text).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ._outs import DynamicOutcome, Out
from ._tool_items import ToolItems, mcp_content, text_of

__all__ = ["ToolThread", "ToolTurn", "TurnTools"]

Json = dict[str, Any]


class ToolThread(Protocol):
    """What a turn's tool items use of their thread (``_items.ThreadMapper``)."""

    @property
    def tools(self) -> ToolItems: ...

    @property
    def now_ms(self) -> Callable[[], int]: ...

    def was_declined(self, call_id: str) -> bool: ...

    def dynamic_outcome(self, call_id: str) -> DynamicOutcome | None: ...


class ToolTurn(Protocol):
    """What a turn's tool items use of their turn (``_items.TurnMapper``): its open
    items and the notifications that start, note and complete them."""

    @property
    def thread(self) -> ToolThread: ...

    @property
    def open_items(self) -> dict[str, Json]: ...

    def note(self, method: str, **params: Any) -> Out: ...

    def start_item(self, item: Json) -> Out: ...

    def complete_item(self, item_id: str, **fields: Any) -> Out | None: ...
_PLAN_STATUS = {"pending": "pending", "in_progress": "inProgress", "completed": "completed"}


def _ms(duration_ns: object) -> int | None:
    return duration_ns // 1_000_000 if isinstance(duration_ns, int) else None


class TurnTools:
    def __init__(self, turn: ToolTurn) -> None:
        self._turn = turn
        self._streamed: dict[str, str] = {}  # running shell call id -> its output sent as deltas
        self._feeds: dict[str, str] = {}  # running write_stdin call id -> the open item it feeds
        self._sessions: dict[int, str] = {}  # running session id -> its open command item
        self._output: dict[str, str] = {}  # open command item -> its output so far

    def open_output(self, item_id: str) -> Json:
        """The fields an item still open at the end of the turn is completed with."""
        output = self._output.pop(item_id, None)
        return {"aggregatedOutput": output} if output is not None else {}

    # -- events --------------------------------------------------------------------------

    def call(self, payload: Json) -> list[Out]:
        turn = self._turn
        call_id, args = payload.get("call_id"), payload.get("arguments")
        if payload.get("tool") == "write_stdin" and isinstance(call_id, str) and isinstance(args, dict):
            session = args.get("session_id")
            item_id = self._sessions.get(session) if isinstance(session, int) else None
            if item_id is not None and item_id in turn.open_items:
                self._feeds[call_id] = item_id
                chars = args.get("chars")
                if not isinstance(chars, str) or not chars:  # a poll: nothing was typed
                    return []
                return [turn.note("item/commandExecution/terminalInteraction", itemId=item_id,
                                  processId=str(session), stdin=chars)]
        item = turn.thread.tools.started(payload)
        return [turn.start_item(item)] if item is not None else []

    def progress(self, payload: Json) -> list[Out]:
        call_id, chunk = payload.get("call_id"), payload.get("message")
        if payload.get("stream") != "output" or not isinstance(call_id, str) or not isinstance(chunk, str):
            return []
        item_id = self._feeds.get(call_id, call_id)
        item = self._turn.open_items.get(item_id)
        if item is None or item["type"] != "commandExecution" or not chunk:
            return []  # output after the item ended (a background session) has no item to go to
        self._streamed[call_id] = self._streamed.get(call_id, "") + chunk
        return [self._turn.note("item/commandExecution/outputDelta", itemId=item_id, delta=chunk)]

    def mcp_progress(self, payload: Json) -> list[Out]:
        """An MCP server's progress on a call (``mcp.progress``): ``item/mcpToolCall/progress``
        on its open item, the server's message with how far it is (``2/3``)."""
        call_id = payload.get("call_id")
        item = self._turn.open_items.get(call_id) if isinstance(call_id, str) else None
        if item is None or item["type"] != "mcpToolCall":
            return []
        progress, total, message = payload.get("progress"), payload.get("total"), payload.get("message")
        amount = "" if not isinstance(progress, int | float) else (
            f"{progress:g}/{total:g}" if isinstance(total, int | float) else f"{progress:g}")
        text = f"{message} ({amount})" if isinstance(message, str) and message and amount else (
            message if isinstance(message, str) and message else amount)
        return [self._turn.note("item/mcpToolCall/progress", itemId=call_id, message=text)]

    def result(self, payload: Json) -> list[Out]:
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            return []
        fed = self._feeds.pop(call_id, None)
        if fed is not None:
            return self._fed(call_id, fed, payload)
        item = self._turn.open_items.get(call_id)
        if item is None:
            return []
        kind = item["type"]
        if kind == "commandExecution":
            return self._command(call_id, item, payload)
        if kind == "fileChange":
            fields: Json = {"status": self._status(call_id, payload)}
        elif kind == "dynamicToolCall":
            fields = self._dynamic(call_id, payload)
        elif kind == "mcpToolCall":
            fields = _mcp_outcome(payload)
        else:  # webSearch, imageView: nothing more to say
            fields = {}
        return self._done(call_id, **fields)

    def plan(self, payload: Json) -> list[Out]:
        """``plan.updated`` (``update_plan``): ``turn/plan/updated``, the whole plan."""
        steps = payload.get("plan")
        plan = [{"step": str(step.get("step", "")), "status": _PLAN_STATUS.get(str(step.get("status")), "pending")}
                for step in (steps if isinstance(steps, list) else []) if isinstance(step, dict)]
        explanation = payload.get("explanation")
        return [self._turn.note("turn/plan/updated", explanation=explanation if isinstance(explanation, str) else None,
                                plan=plan)]

    # -- results -------------------------------------------------------------------------

    def _done(self, item_id: str, **fields: Any) -> list[Out]:
        done = self._turn.complete_item(item_id, **fields)
        return [done] if done is not None else []

    def _status(self, call_id: str, payload: Json) -> str:
        if payload.get("status") == "completed":
            return "completed"
        return "declined" if self._turn.thread.was_declined(call_id) else "failed"

    def _dynamic(self, call_id: str, payload: Json) -> Json:
        outcome = self._turn.thread.dynamic_outcome(call_id)
        success = outcome.success if outcome is not None else payload.get("status") == "completed"
        return {"status": "completed" if success else "failed", "success": success,
                "contentItems": [dict(c) for c in outcome.content_items] if outcome is not None else None,
                "durationMs": _ms(payload.get("duration_ns"))}

    def _rest(self, call_id: str, item_id: str, output: str) -> list[Out]:
        """The part of a call's output its progress did not stream, as one delta."""
        streamed = self._streamed.pop(call_id, "")
        rest = output[len(streamed):] if output.startswith(streamed) else ""
        if not rest:
            return []
        return [self._turn.note("item/commandExecution/outputDelta", itemId=item_id, delta=rest)]

    def _command(self, call_id: str, item: Json, payload: Json) -> list[Out]:
        """An ``exec_command`` (or a ``write_stdin`` shown on its own) returned."""
        fields = self._turn.thread.tools.command_outcome(payload)
        output = fields.pop("aggregatedOutput")
        outs = self._rest(call_id, call_id, output)
        total = self._output.pop(call_id, "") + output
        if self._turn.thread.was_declined(call_id):
            fields["status"] = "declined"
        elif "processId" in fields and item["source"] == "unifiedExecStartup":  # still running: the item stays open
            item["processId"] = fields["processId"]
            self._sessions[int(fields["processId"])] = call_id
            self._output[call_id] = total
            self._turn.thread.tools.note_session(fields["processId"], item)
            return outs
        return outs + self._done(call_id, aggregatedOutput=total, durationMs=_ms(payload.get("duration_ns")),
                                 **fields)

    def _fed(self, call_id: str, item_id: str, payload: Json) -> list[Out]:
        """A ``write_stdin`` to an open command's session returned."""
        fields = self._turn.thread.tools.command_outcome(payload)
        if "processId" not in fields and fields["exitCode"] is None:  # the call failed: no output, no news
            self._streamed.pop(call_id, None)
            return []
        output = fields.pop("aggregatedOutput")
        outs = self._rest(call_id, item_id, output)
        total = self._output.get(item_id, "") + output
        if "processId" in fields:  # still running
            self._output[item_id] = total
            return outs
        self._output.pop(item_id, None)
        self._sessions = {session: item for session, item in self._sessions.items() if item != item_id}
        started = self._turn.open_items.get(item_id, {}).get("startedAtMs")
        elapsed = self._turn.thread.now_ms() - started if isinstance(started, int) else None
        return outs + self._done(item_id, aggregatedOutput=total, durationMs=elapsed, **fields)


def _mcp_outcome(payload: Json) -> Json:
    result, duration = payload.get("result"), _ms(payload.get("duration_ns"))
    if payload.get("status") == "completed":
        return {"status": "completed", "result": {"content": mcp_content(result), "structuredContent": None},
                "error": None, "durationMs": duration}
    return {"status": "failed", "result": None, "error": {"message": text_of(result)}, "durationMs": duration}
