"""App-server v2 notifications to ``codex exec --json`` events (pure: no I/O, no Trio).

``trio-agent exec`` is an in-process client of the app server (``_session``), as
the real ``codex exec`` is; this module is its output side. ``ExecEvents`` follows one
thread and one turn: it is told the thread (``thread_started``) and the turn id that
``turn/start`` answered (``turn_id``), is fed every notification the server sends in
order, and returns the exec JSONL events they mean -- the shapes of codex's
``exec_events.rs``, which ``@openai/codex-sdk`` parses (its ``ThreadEvent`` and
``ThreadItem`` types):

- ``turn/started`` -> ``turn.started``;
- ``item/started`` / ``item/completed`` -> ``item.started`` / ``item.completed`` with
  the item renamed: ``agentMessage`` -> ``agent_message`` {text}, ``reasoning`` ->
  ``reasoning`` {text: the summary parts joined}, ``commandExecution`` ->
  ``command_execution`` {command, aggregated_output, exit_code, status},
  ``fileChange`` -> ``file_change`` {changes: [{path, kind}], status},
  ``mcpToolCall`` -> ``mcp_tool_call`` {server, tool, arguments, result, error,
  status}, ``webSearch`` -> ``web_search`` {query, action}, ``collabAgentToolCall``
  -> ``collab_tool_call``. Messages and reasoning are shown once, when complete (an
  empty reasoning summary not at all); user messages, dynamic tool calls and
  compactions are not exec items. Item ids are codex's: ``item_0``, ``item_1``... in
  order of first appearance, an item keeping its id from start to completion;
- ``item/fileChange/patchUpdated`` -> ``item.updated`` of that file change;
- ``turn/plan/updated`` -> a ``todo_list`` item: started at the first plan, updated
  by later ones, completed when the turn ends;
- ``error`` -> a top-level ``error`` event (also a retry's, as codex does);
  ``warning``, ``configWarning``, ``deprecationNotice`` and ``model/rerouted`` -> an
  ``error`` item (codex's "non-fatal error surfaced as an item");
- ``thread/tokenUsage/updated`` -> remembered; ``turn/completed`` then closes what is
  still open (the todo list, items started and never completed) and ends the turn:
  ``completed`` -> ``turn.completed`` with ``usage`` {input_tokens,
  cached_input_tokens, cache_write_input_tokens, output_tokens,
  reasoning_output_tokens}; ``failed`` -> ``turn.failed`` {error: {message}};
  ``interrupted`` -> nothing here (the caller says why it stopped, ``interrupted``).

Usage is the thread's running total, as codex 0.171 prints it (the transcripts: a
resumed thread's second turn reports the first turn's tokens plus its own), though the
SDK's type comment says "during the turn"; trio-agent follows the binary.

Notifications of other threads or turns, and everything the exec stream has no event
for (deltas, status changes), map to nothing.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["ExecEvents", "TurnOutcome", "exec_item", "usage_of"]

Json = dict[str, Any]

_COMMAND_STATUS = {"inProgress": "in_progress", "completed": "completed", "failed": "failed",
                   "declined": "declined"}
_PATCH_STATUS = {"inProgress": "in_progress", "completed": "completed", "failed": "failed", "declined": "failed"}
_CALL_STATUS = {"inProgress": "in_progress", "completed": "completed", "failed": "failed"}
_COLLAB_TOOLS = {"spawnAgent": "spawn_agent", "sendInput": "send_input", "resumeAgent": "wait", "wait": "wait",
                 "closeAgent": "close_agent"}
_COLLAB_AGENT = {"pendingInit": "pending_init", "running": "running", "interrupted": "interrupted",
                 "completed": "completed", "errored": "errored", "shutdown": "shutdown", "notFound": "not_found"}
_USAGE = (("input_tokens", "inputTokens"), ("cached_input_tokens", "cachedInputTokens"),
          ("cache_write_input_tokens", "cacheWriteInputTokens"), ("output_tokens", "outputTokens"),
          ("reasoning_output_tokens", "reasoningOutputTokens"))
_WARNINGS = ("warning", "configWarning", "deprecationNotice")


class TurnOutcome(enum.Enum):
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _detailed(error: object) -> str:
    """A ``TurnError``'s message, with its additional details as codex shows them."""
    if not isinstance(error, dict):
        return ""
    message, details = _text(error.get("message")), error.get("additionalDetails")
    return f"{message} ({details})" if isinstance(details, str) and details else message


def usage_of(total: object) -> Json:
    """A v2 ``TokenUsageBreakdown`` as the exec ``Usage`` (zeros where unknown)."""
    source = total if isinstance(total, dict) else {}
    counts: Json = {}
    for name, wire in _USAGE:
        value = source.get(wire)
        counts[name] = value if isinstance(value, int) and not isinstance(value, bool) else 0
    return counts


def _command(item: Json) -> Json:
    exit_code = item.get("exitCode")
    return {"type": "command_execution", "command": _text(item.get("command")),
            "aggregated_output": _text(item.get("aggregatedOutput")),
            "exit_code": exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
            "status": _COMMAND_STATUS.get(_text(item.get("status")), "in_progress")}


def _changes(changes: object) -> list[Json]:
    shown: list[Json] = []
    for change in _list(changes):
        if not isinstance(change, dict):
            continue
        kind = change.get("kind")
        name = kind.get("type") if isinstance(kind, dict) else None
        shown.append({"path": _text(change.get("path")), "kind": name if name in ("add", "delete") else "update"})
    return shown


def _file_change(item: Json) -> Json:
    return {"type": "file_change", "changes": _changes(item.get("changes")),
            "status": _PATCH_STATUS.get(_text(item.get("status")), "in_progress")}


def _mcp_call(item: Json) -> Json:
    result, error = item.get("result"), item.get("error")
    return {
        "type": "mcp_tool_call", "server": _text(item.get("server")), "tool": _text(item.get("tool")),
        "arguments": item.get("arguments"),
        "result": {"content": result.get("content") if isinstance(result.get("content"), list) else [],
                   "structured_content": result.get("structuredContent")} if isinstance(result, dict) else None,
        "error": {"message": _text(error.get("message"))} if isinstance(error, dict) else None,
        "status": _CALL_STATUS.get(_text(item.get("status")), "in_progress"),
    }


def _collab_call(item: Json) -> Json:
    states = item.get("agentsStates")
    return {
        "type": "collab_tool_call", "tool": _COLLAB_TOOLS.get(_text(item.get("tool")), "wait"),
        "sender_thread_id": _text(item.get("senderThreadId")),
        "receiver_thread_ids": [t for t in _list(item.get("receiverThreadIds")) if isinstance(t, str)],
        "prompt": item.get("prompt") if isinstance(item.get("prompt"), str) else None,
        "agents_states": {
            thread: {"status": _COLLAB_AGENT.get(_text(state.get("status")), "running"),
                     "message": state.get("message") if isinstance(state.get("message"), str) else None}
            for thread, state in (states.items() if isinstance(states, dict) else ()) if isinstance(state, dict)
        },
        "status": _CALL_STATUS.get(_text(item.get("status")), "in_progress"),
    }


def exec_item(item: object) -> Json | None:
    """The exec item (without its ``id``) of a v2 ``ThreadItem``; None for items the exec
    stream does not show."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind == "agentMessage":
        return {"type": "agent_message", "text": _text(item.get("text"))}
    if kind == "reasoning":
        summary = item.get("summary")
        text = "\n".join(part for part in _list(summary) if isinstance(part, str))
        return {"type": "reasoning", "text": text} if text.strip() else None
    if kind == "webSearch":
        action = item.get("action")
        return {"type": "web_search", "query": _text(item.get("query")),
                "action": action if isinstance(action, dict) else {"type": "other"}}
    shape = _SHAPES.get(kind) if isinstance(kind, str) else None
    return shape(item) if shape is not None else None


_SHAPES = {"commandExecution": _command, "fileChange": _file_change, "mcpToolCall": _mcp_call,
           "collabAgentToolCall": _collab_call}


class ExecEvents:
    """One exec turn's notifications to exec events (see the module docstring).

    ``turn_id`` is set by the caller from ``turn/start``'s answer; until then no
    turn-scoped notification is shown. ``outcome`` is set by the turn's
    ``turn/completed``; ``final_message`` is the last agent message of the turn."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.turn_id: str | None = None
        self.outcome: TurnOutcome | None = None
        self.final_message: str | None = None
        self._next = 0
        self._ids: dict[str, str] = {}  # v2 item id -> exec id, while the item is open
        self._todo: tuple[str, list[Json]] | None = None
        self._total: object = None
        self._last_error: str | None = None

    def thread_started(self) -> Json:
        return {"type": "thread.started", "thread_id": self.thread_id}

    def warning(self, message: str) -> Json:
        """A non-fatal problem, shown as an ``error`` item."""
        return {"type": "item.completed", "item": {"id": self._new_id(), "type": "error", "message": message}}

    def _new_id(self) -> str:
        exec_id = f"item_{self._next}"
        self._next += 1
        return exec_id

    def _ours(self, params: Json, whole_turn: bool) -> bool:
        """Whether a notification is about this thread's turn (named by ``turn.id`` in
        ``turn/started``/``turn/completed``, by ``turnId`` elsewhere)."""
        if params.get("threadId") != self.thread_id or self.turn_id is None:
            return False
        if whole_turn:
            turn = params.get("turn")
            return isinstance(turn, dict) and turn.get("id") == self.turn_id
        return params.get("turnId") == self.turn_id

    def _started_id(self, raw: str) -> str:
        exec_id = self._ids.get(raw)
        if exec_id is None:
            exec_id = self._ids[raw] = self._new_id()
        return exec_id

    def on_notification(self, method: str, params: object) -> list[Json]:
        if not isinstance(params, dict) or self.outcome is not None:
            return []
        if method in _WARNINGS:
            return self._warning(method, params)
        handler = _HANDLERS.get(method)
        if handler is None or not self._ours(params, method in ("turn/started", "turn/completed")):
            return []
        return handler(self, params)

    def _warning(self, method: str, params: Json) -> list[Json]:
        if method == "warning":
            thread = params.get("threadId")
            if thread not in (None, self.thread_id):
                return []
            return [self.warning(_text(params.get("message")))]
        details = params.get("details")
        summary = _text(params.get("summary"))
        return [self.warning(f"{summary} ({details})" if isinstance(details, str) and details else summary)]

    # -- handlers ------------------------------------------------------------------

    def _turn_started(self, params: Json) -> list[Json]:
        return [{"type": "turn.started"}]

    def _item_started(self, params: Json) -> list[Json]:
        item = params.get("item")
        shown = exec_item(item)
        if shown is None or not isinstance(item, dict) or item.get("type") in ("agentMessage", "reasoning"):
            return []
        raw = _text(item.get("id"))
        update = item.get("type") == "fileChange" and raw in self._ids
        exec_id = self._started_id(raw)
        return [{"type": "item.updated" if update else "item.started", "item": {"id": exec_id, **shown}}]

    def _item_completed(self, params: Json) -> list[Json]:
        event = self._completed(params.get("item"))
        return [event] if event is not None else []

    def _completed(self, item: object) -> Json | None:
        shown = exec_item(item)
        if shown is None or not isinstance(item, dict):
            return None
        exec_id = self._ids.pop(_text(item.get("id")), None) or self._new_id()
        if shown["type"] == "agent_message":
            self.final_message = shown["text"]
        return {"type": "item.completed", "item": {"id": exec_id, **shown}}

    def _patch_updated(self, params: Json) -> list[Json]:
        exec_id = self._started_id(_text(params.get("itemId")))
        shown = _file_change({"changes": params.get("changes"), "status": "inProgress"})
        return [{"type": "item.updated", "item": {"id": exec_id, **shown}}]

    def _plan_updated(self, params: Json) -> list[Json]:
        steps = params.get("plan")
        items = [{"text": _text(step.get("step")), "completed": step.get("status") == "completed"}
                 for step in _list(steps) if isinstance(step, dict)]
        if self._todo is None:
            self._todo = (self._new_id(), items)
            return [{"type": "item.started", "item": {"id": self._todo[0], "type": "todo_list", "items": items}}]
        self._todo = (self._todo[0], items)
        return [{"type": "item.updated", "item": {"id": self._todo[0], "type": "todo_list", "items": items}}]

    def _error(self, params: Json) -> list[Json]:
        message = _detailed(params.get("error"))
        self._last_error = message
        return [{"type": "error", "message": message}]

    def _rerouted(self, params: Json) -> list[Json]:
        return [self.warning(f"model rerouted: {_text(params.get('fromModel'))} -> {_text(params.get('toModel'))} "
                             f"({_text(params.get('reason'))})")]

    def _usage(self, params: Json) -> list[Json]:
        usage = params.get("tokenUsage")
        if isinstance(usage, dict):
            self._total = usage.get("total")
        return []

    def _turn_completed(self, params: Json) -> list[Json]:
        turn = params["turn"]
        events: list[Json] = []
        if self._todo is not None:
            todo_id, items = self._todo
            self._todo = None
            events.append({"type": "item.completed", "item": {"id": todo_id, "type": "todo_list", "items": items}})
        for item in _list(turn.get("items")):  # started and never completed: completed from the turn's record
            if isinstance(item, dict) and _text(item.get("id")) in self._ids:
                event = self._completed(item)
                if event is not None:
                    events.append(event)
        status = turn.get("status")
        if status == "completed":
            self.outcome = TurnOutcome.COMPLETED
            events.append({"type": "turn.completed", "usage": usage_of(self._total)})
        elif status == "failed":
            self.outcome = TurnOutcome.FAILED
            message = _detailed(turn.get("error")) or self._last_error or "turn failed"
            events.append({"type": "turn.failed", "error": {"message": message}})
        else:
            self.outcome = TurnOutcome.INTERRUPTED
        return events


_HANDLERS = {
    "turn/started": ExecEvents._turn_started,
    "item/started": ExecEvents._item_started,
    "item/completed": ExecEvents._item_completed,
    "item/fileChange/patchUpdated": ExecEvents._patch_updated,
    "turn/plan/updated": ExecEvents._plan_updated,
    "error": ExecEvents._error,
    "model/rerouted": ExecEvents._rerouted,
    "thread/tokenUsage/updated": ExecEvents._usage,
    "turn/completed": ExecEvents._turn_completed,
}
