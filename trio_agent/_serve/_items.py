"""Agent events to app-server v2 items and notifications (pure: no I/O, no Trio).

Theory of operation. ``ThreadMapper`` follows one loaded thread's agent: it is fed
every ``AgentEvent`` in order and returns the protocol messages (``Out``) they mean.
Each agent turn gets a ``TurnMapper`` and a ``TurnRecord`` whose wire id is a string
minted by the server; the mapping (``docs/app-server.md`` has the table):

- the prompt and each steer that joins -> ``userMessage`` (started and completed at once);
- ``assistant.delta``/``assistant.message`` -> ``agentMessage`` with
  ``item/agentMessage/delta``;
- ``reasoning.summary.delta`` -> ``reasoning`` with ``item/reasoning/summaryTextDelta``;
- tool calls -> one item per action, never one for the ``exec`` cell that made it
  (``_tool_items`` has the table, ``_tool_turn`` the lifecycle): a command run from a
  cell is one ``commandExecution`` (its command line, cwd, output streamed as
  ``item/commandExecution/outputDelta``, exit code, duration; ``write_stdin`` to it
  joins the same item), ``apply_patch`` a ``fileChange``, an MCP call an
  ``mcpToolCall``, ``web__run`` a ``webSearch``, ``view_image`` an ``imageView``, a
  dynamic tool (declared by the client) a ``dynamicToolCall``;
- ``plan.updated`` (``update_plan``) -> ``turn/plan/updated``;
- ``approval.requested``/``approval.resolved`` -> the thread's ``waitingOnApproval``
  flag while any is pending; a call whose approval was not given ends ``declined``
  (the approval request names the call's item: ``_approvals``);
- a compaction -> ``contextCompaction`` and ``thread/compacted``;
- ``model.call.completed`` usage -> ``thread/tokenUsage/updated``;
- a retry -> ``error`` with ``willRetry: true``; a failed turn -> ``error`` then
  ``turn/completed`` with status ``failed``; a cancelled one -> ``interrupted``.

The thread status the client sees is derived here too, from the same events, so it is
never ahead of or behind the notifications: ``active`` from ``run.started``, then
``idle`` or ``systemError`` (a failed turn) from the terminal event, each announced
(``thread/status/changed``, to every connection) before ``turn/started`` /
``turn/completed``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from .._events import AgentEvent, EventKind
from .._threads import ThreadStatus
from ._heard import TURN_EDGES, completed_frame
from ._jsonrpc import encode_value, string_text
from ._outs import DynamicOutcome, Out
from ._shapes import TurnRecord, add_usage, status_json, usage_breakdown
from ._tool_items import ToolItems, text_of
from ._tool_turn import TurnTools

__all__ = ["ThreadMapper", "TurnMapper", "UserInput"]

Json = dict[str, Any]
_PHASES = ("commentary", "partial_answer", "final_answer")


@attrs.frozen
class UserInput:
    """A prompt or steer as the client gave it: the text and images for the agent, and
    the v2 ``UserInput`` content for the ``userMessage`` item."""

    text: str
    images: tuple[str, ...] = ()
    content: tuple[Json, ...] = ()
    client_id: str | None = None

    def item_content(self) -> list[Json]:
        if self.content:
            return [dict(part) for part in self.content]
        return [{"type": "text", "text": self.text, "text_elements": []}]


class TurnMapper:
    """One turn's items. ``record`` is what ``thread/read`` shows of it."""

    def __init__(self, thread: ThreadMapper, record: TurnRecord, user_input: UserInput | None) -> None:
        self.thread = self._thread = thread
        self.record = record
        self.user_input = user_input
        self.steers: list[UserInput] = []  # accepted, waiting for their run.steered
        self._open: dict[str, Json] = {}
        self._reasoning: dict[int, str] = {}  # model call index -> open reasoning item id
        self._compactions = 0
        self._messages: set[str] = set()  # agentMessage ids shown in this turn
        self._delta_prefixes: dict[str, str] = {}  # agentMessage id -> its deltas' params text up to the delta
        self._tools: TurnTools = TurnTools(self)
        self._error: str | None = None
        self.ended = False

    # -- plumbing ----------------------------------------------------------------------

    def _base(self) -> Json:
        return {"threadId": self._thread.thread_id, "turnId": self.record.id}

    @property
    def open_items(self) -> dict[str, Json]:
        """The items started and not yet completed, by id (live: the fields they will end with)."""
        return self._open

    def note(self, method: str, **params: Any) -> Out:
        """A notification about this turn (``threadId`` and ``turnId`` first)."""
        return Out(method, {**self._base(), **params})

    def start_item(self, item: Json) -> Out:
        now = self._thread.now_ms()
        item["startedAtMs"] = now
        item["completedAtMs"] = None
        self._open[item["id"]] = item
        return Out("item/started", {"item": dict(item), **self._base(), "startedAtMs": now})

    def complete_item(self, item_id: str, **fields: Any) -> Out | None:
        item = self._open.pop(item_id, None)
        if item is None:
            return None
        now = self._thread.now_ms()
        item.update(fields, completedAtMs=now)
        self.record.items.append(item)
        return Out("item/completed", {"item": dict(item), **self._base(), "contentTokenCount": None,
                                      "completedAtMs": now})

    def _user_message(self, given: UserInput) -> list[Out]:
        item_id = self._thread.new_id()
        item = {"type": "userMessage", "id": item_id, "clientId": given.client_id, "content": given.item_content()}
        started = self.start_item(item)
        completed = self.complete_item(item_id)
        assert completed is not None
        return [started, completed]

    # -- lifecycle ---------------------------------------------------------------------

    def started(self) -> list[Out]:
        self.record.started_at_ms = self._thread.now_ms()
        outs = [Out("turn/started", {"threadId": self._thread.thread_id, "turn": self.record.to_json("notLoaded")})]
        if self.user_input is not None:
            outs += self._user_message(self.user_input)
        return outs

    def steered(self) -> list[Out]:
        given = self.steers.pop(0) if self.steers else None
        return self._user_message(given) if given is not None else []

    def finish(self, status: str) -> list[Out]:
        """The terminal event: close what is open, then ``error`` (a failure) and
        ``turn/completed``; the status announcement goes between them (ThreadMapper)."""
        outs = [out for open_id in list(self._open)
                if (out := self.complete_item(open_id, **self._tools.open_output(open_id))) is not None]
        self.ended = True
        self.record.completed_at_ms = self._thread.now_ms()
        if status == "failed":
            self.record.status = "failed"
            self.record.error = {"message": self._error or "the turn failed", "codexErrorInfo": None,
                                 "additionalDetails": None}
            outs.append(Out("error", {"error": self.record.error, **self._base(), "willRetry": False}))
        else:
            self.record.status = "interrupted" if status == "cancelled" else "completed"
        return outs

    def completed(self) -> Out:
        return Out("turn/completed", {"threadId": self._thread.thread_id, "turn": self.record.to_json("summary")})

    # -- events ------------------------------------------------------------------------

    def on_event(self, kind: EventKind, payload: Json) -> list[Out]:
        handler = _HANDLERS.get(kind)
        return handler(self, payload) if handler is not None else []

    def _assistant_delta(self, payload: Json) -> list[Out]:
        item_id = payload.get("item_id")
        if not isinstance(item_id, str) or not item_id:
            item_id = self._message_id(payload)
        item = self._open.get(item_id)
        outs = []
        if item is None:
            outs.append(self._start_message(item_id, payload))
            item = self._open[item_id]
        text = payload.get("text", "")
        item["text"] += text
        prefix = self._delta_prefixes.get(item_id)
        if prefix is None:  # the params up to the delta's value, encoded once per item
            params = encode_value({**self._base(), "itemId": item_id, "delta": ""})
            prefix = self._delta_prefixes[item_id] = params[:-3]  # without '""}'
        outs.append(Out("item/agentMessage/delta",
                        {"threadId": self._thread.thread_id, "turnId": self.record.id, "itemId": item_id,
                         "delta": text},  # (``_base()``'s two first, built in place: per delta)
                        params_text=f"{prefix}{string_text(text)}}}"))
        return outs

    def _assistant_message(self, payload: Json) -> list[Out]:
        item_id = self._message_id(payload)
        outs = [] if item_id in self._open else [self._start_message(item_id, payload)]
        done = self.complete_item(item_id, text=payload.get("text", ""))
        return outs + ([done] if done is not None else [])

    def _message_id(self, payload: Json) -> str:
        item_id = payload.get("item_id")
        if isinstance(item_id, str) and item_id:
            return item_id
        return f"msg-{self.record.id}-{payload.get('model_call_index')}"

    def _start_message(self, item_id: str, payload: Json) -> Out:
        self._messages.add(item_id)
        phase = payload.get("phase")
        return self.start_item({
            "type": "agentMessage", "id": item_id, "text": "", "phase": phase if phase in _PHASES else None,
            "moderation": None, "memoryCitation": None, "delivery": None, "questions": None,
        })

    def _api_event(self, payload: Json) -> list[Out]:
        """A server that puts an assistant message only in ``response.completed`` (no
        ``output_item.done`` before it): the message is shown from there -- unless it
        answers a compaction request (a summary is no answer: the compaction is its
        ``contextCompaction`` item)."""
        frame = completed_frame(payload)
        if frame is None or payload.get("phase") == "compaction" or not isinstance(frame.get("response"), dict):
            return []
        outs: list[Out] = []
        for item in frame["response"].get("output") or []:
            if not isinstance(item, dict) or item.get("type") != "message" or item.get("role") != "assistant":
                continue
            item_id = item.get("id") if isinstance(item.get("id"), str) else None
            if item_id is not None and item_id in self._messages:
                continue
            text = text_of(item.get("content") or [])
            message = {"item_id": item_id or self._thread.new_id(), "text": text, "phase": item.get("phase"),
                       "model_call_index": payload.get("model_call_index")}
            outs += self._assistant_message(message)
        return outs

    def _reasoning_delta(self, payload: Json) -> list[Out]:
        index = payload.get("model_call_index")
        index = index if isinstance(index, int) else 0
        outs: list[Out] = []
        item_id = self._reasoning.get(index)
        if item_id is None:
            item_id = self._reasoning[index] = f"rs-{self.record.id}-{index}"
            outs.append(self.start_item({"type": "reasoning", "id": item_id, "summary": [""], "content": []}))
        text = payload.get("text", "")
        self._open[item_id]["summary"][0] += text
        outs.append(Out("item/reasoning/summaryTextDelta", {**self._base(), "itemId": item_id, "delta": text,
                                                             "summaryIndex": 0}))
        return outs

    def _call_ended(self, payload: Json) -> list[Out]:
        outs = self._close_reasoning(payload.get("call_index"))
        usage = payload.get("usage")
        if isinstance(usage, dict):
            outs.append(self._thread.token_usage(self, usage_breakdown(usage)))
        return outs

    def _close_reasoning(self, index: object) -> list[Out]:
        item_id = self._reasoning.pop(index, None) if isinstance(index, int) else None
        done = self.complete_item(item_id) if item_id is not None else None
        return [done] if done is not None else []

    def _call_failed(self, payload: Json) -> list[Out]:
        return self._close_reasoning(payload.get("call_index"))

    def _retrying(self, payload: Json) -> list[Out]:
        message = payload.get("error") or "the model call failed; retrying"
        error = {"message": str(message), "codexErrorInfo": None, "additionalDetails": None}
        return [Out("error", {"error": error, **self._base(), "willRetry": True})]

    def _run_error(self, payload: Json) -> list[Out]:
        self._error = str(payload.get("message") or "the turn failed")
        return []

    def _compaction_started(self, payload: Json) -> list[Out]:
        self._compactions += 1
        item_id = f"compaction-{self.record.id}-{self._compactions}"
        return [self.start_item({"type": "contextCompaction", "id": item_id})]

    def _compaction_ended(self, payload: Json, *, compacted: bool) -> list[Out]:
        done = self.complete_item(f"compaction-{self.record.id}-{self._compactions}")
        outs = [done] if done is not None else []
        if compacted:
            outs.append(Out("thread/compacted", self._base()))
        return outs

_HANDLERS: dict[EventKind, Callable[[TurnMapper, Json], list[Out]]] = {
    EventKind.ASSISTANT_DELTA: TurnMapper._assistant_delta,
    EventKind.ASSISTANT_MESSAGE: TurnMapper._assistant_message,
    EventKind.REASONING_SUMMARY_DELTA: TurnMapper._reasoning_delta,
    EventKind.MODEL_CALL_COMPLETED: TurnMapper._call_ended,
    EventKind.MODEL_CALL_FAILED: TurnMapper._call_failed,
    EventKind.MODEL_ATTEMPT_RETRYING: TurnMapper._retrying,
    EventKind.RUN_ERROR: TurnMapper._run_error,
    EventKind.MODEL_COMPACTION_STARTED: TurnMapper._compaction_started,
    EventKind.MODEL_COMPACTION_COMPLETED: lambda m, p: m._compaction_ended(p, compacted=True),
    EventKind.MODEL_COMPACTION_FAILED: lambda m, p: m._compaction_ended(p, compacted=False),
    EventKind.TOOL_CALL: lambda m, p: m._tools.call(p),
    EventKind.TOOL_RESULT: lambda m, p: m._tools.result(p),
    EventKind.TOOL_PROGRESS: lambda m, p: m._tools.progress(p),
    EventKind.MCP_PROGRESS: lambda m, p: m._tools.mcp_progress(p),
    EventKind.PLAN_UPDATED: lambda m, p: m._tools.plan(p),
    EventKind.API_EVENT: TurnMapper._api_event,
}

class ThreadMapper:
    """One loaded thread's agent events to protocol messages (see the module docstring).

    ``turns`` holds every turn the client can read (earlier ones from the store, then
    this agent's); ``by_agent_turn`` maps this agent's integer turn ids to their mapper.
    ``new_id`` mints item and turn ids; ``now_ms`` is the wire clock; ``outcomes`` looks
    up the client's answer to a dynamic tool call.
    """

    def __init__(
        self, thread_id: str, *, cwd: str, model_context_window: int, dynamic_tools: frozenset[str],
        new_id: Callable[[], str], now_ms: Callable[[], int],
        outcomes: Callable[[str], DynamicOutcome | None] = lambda call_id: None,
        turns: list[TurnRecord] | None = None, status: ThreadStatus = ThreadStatus.IDLE, shell: str | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.cwd = cwd
        self.dynamic_tools = dynamic_tools
        self.new_id = new_id
        self.now_ms = now_ms
        self._outcomes = outcomes
        self.window = model_context_window
        self.turns: list[TurnRecord] = list(turns or [])
        self.by_agent_turn: dict[int, TurnMapper] = {}
        self.status = status
        self.usage_total: Json | None = None
        self.tools = ToolItems(cwd, dynamic_tools, shell)  # shell: the one commands run in (None: the user's)
        self._shown_flags: tuple[str, ...] = ()
        self._approvals: dict[str, str] = {}  # pending approval id -> its call id
        self._declined: set[str] = set()  # calls whose approval was not given (until their item ends)

    # -- turns -------------------------------------------------------------------------

    def accept_turn(self, agent_turn_id: int, user_input: UserInput | None) -> TurnMapper:
        """A turn the server accepted (or first heard of): its record, before it runs."""
        mapper = self.by_agent_turn.get(agent_turn_id)
        if mapper is None:
            mapper = TurnMapper(self, TurnRecord(self.new_id()), user_input)
            self.by_agent_turn[agent_turn_id] = mapper
            self.turns.append(mapper.record)
        return mapper

    def wire_turn(self, agent_turn_id: int | None) -> TurnMapper | None:
        return self.by_agent_turn.get(agent_turn_id) if agent_turn_id is not None else None

    def find_turn(self, wire_id: str) -> tuple[int, TurnMapper] | None:
        for agent_turn_id, mapper in self.by_agent_turn.items():
            if mapper.record.id == wire_id:
                return agent_turn_id, mapper
        return None

    # -- events ------------------------------------------------------------------------

    def on_event(self, event: AgentEvent) -> list[Out]:
        kind = event.kind
        if event.turn_id is None:  # warmup, connections, background cells: not part of a turn
            return []
        if kind in TURN_EDGES:  # (else straight to the turn's mapper: most events, every delta)
            return self._edge(event)
        live = self.by_agent_turn.get(event.turn_id)  # (``wire_turn``, inline: per event)
        if live is None or live.ended:
            return []
        return live.on_event(kind, event.payload)

    def _edge(self, event: AgentEvent) -> list[Out]:
        """An event of a turn's or the thread's life: its start, a steer, its end, an approval."""
        kind = event.kind
        assert event.turn_id is not None
        if kind is EventKind.APPROVAL_REQUESTED or kind is EventKind.APPROVAL_RESOLVED:
            return self._approval(event)  # thread-wide, also after the turn ended (withdrawn)
        if kind is EventKind.RUN_STARTED:
            mapper = self.accept_turn(event.turn_id, None)
            if mapper.record.started_at_ms is not None:
                return []
            return self._status(ThreadStatus.ACTIVE) + mapper.started()
        live = self.wire_turn(event.turn_id)
        if live is None or live.ended:
            return []
        mapper = live
        if kind is EventKind.RUN_STEERED:
            return mapper.steered()
        if kind.is_terminal:
            status = str(event.payload.get("status", "completed"))
            outs = mapper.finish(status)
            after = ThreadStatus.SYSTEM_ERROR if status == "failed" else ThreadStatus.IDLE
            return outs + self._status(after) + [mapper.completed()]
        return mapper.on_event(kind, event.payload)

    @property
    def active_flags(self) -> tuple[str, ...]:
        """``waitingOnApproval`` while an approval of a running turn is pending."""
        return ("waitingOnApproval",) if self._approvals and self.status is ThreadStatus.ACTIVE else ()

    def _status(self, status: ThreadStatus) -> list[Out]:
        before = (self.status, self._shown_flags)
        self.status = status
        self._shown_flags = self.active_flags
        if (status, self._shown_flags) == before:
            return []
        return [Out("thread/status/changed", {"threadId": self.thread_id,
                                              "status": status_json(status, self._shown_flags)}, broadcast=True)]

    def _approval(self, event: AgentEvent) -> list[Out]:
        approval_id, call_id = event.payload.get("approval_id"), event.payload.get("call_id")
        if not isinstance(approval_id, str) or not isinstance(call_id, str):
            return []
        if event.kind is EventKind.APPROVAL_REQUESTED:
            self._approvals[approval_id] = call_id
        else:
            self._approvals.pop(approval_id, None)
            if event.payload.get("decision") not in ("approve", "approve_for_session"):
                self._declined.add(call_id)
        return self._status(self.status)

    def was_declined(self, call_id: str) -> bool:
        """Whether ``call_id``'s approval was refused (asked once: its item is ending)."""
        if call_id in self._declined:
            self._declined.discard(call_id)
            return True
        return False

    def set_status(self, status: ThreadStatus) -> list[Out]:
        """A status the manager reported (``NOT_LOADED`` on unload)."""
        return self._status(status)

    def token_usage(self, turn: TurnMapper, last: Json) -> Out:
        self.usage_total = last if self.usage_total is None else add_usage(self.usage_total, last)
        usage = {"total": self.usage_total, "last": last, "modelContextWindow": self.window}
        return Out("thread/tokenUsage/updated", {"threadId": self.thread_id, "turnId": turn.record.id,
                                                 "tokenUsage": usage})

    # -- tools -------------------------------------------------------------------------

    def open_item(self, item_id: str) -> Json | None:
        """The item ``item_id`` while a live turn shows it as started (an approval names it)."""
        for turn in self.by_agent_turn.values():
            if not turn.ended and item_id in turn.open_items:
                return turn.open_items[item_id]
        return None

    def dynamic_outcome(self, call_id: str) -> DynamicOutcome | None:
        return self._outcomes(call_id)
