"""The app-server v2 objects this server sends: ``Thread``, ``Turn``, ``ThreadStatus``,
token usage (pure builders; field names and enums as the protocol schema has them).

``ThreadMeta`` is what the server knows of a thread beyond its rollout (model, cwd,
dynamic tools, creation time...); ``TurnRecord`` is one turn as the protocol shows it
(``id`` is a string minted by the server, UUIDv7). Timestamps: ``createdAt``,
``startedAt``... are Unix seconds, ``*AtMs`` Unix milliseconds (``_clock.WireClock``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from .._threads import ThreadStatus

__all__ = [
    "ItemsView",
    "ThreadMeta",
    "TurnRecord",
    "status_json",
    "thread_json",
    "usage_breakdown",
]

Json = dict[str, Any]
ItemsView = str  # "notLoaded" | "summary" | "full"
CLI_VERSION = "0.1.0"  # trio_agent.__version__ (not imported: the package imports this module)


def status_json(status: ThreadStatus, active_flags: Sequence[str] = ()) -> Json:
    """``ThreadStatus``; ``active_flags`` (``waitingOnApproval``) count only when active."""
    if status is ThreadStatus.ACTIVE:
        return {"type": "active", "activeFlags": list(active_flags)}
    return {"type": status.value}


@attrs.define
class ThreadMeta:
    """A thread's settings and identity, kept by the server (``_store``)."""

    thread_id: str
    created_at: int  # Unix seconds
    cwd: str
    model: str
    model_provider: str
    ephemeral: bool = False
    forked_from: str | None = None
    dynamic_tools: list[Json] = attrs.field(factory=list)
    instructions: str | None = None
    originator: str | None = None
    preview: str = ""
    updated_at: int | None = None
    sandbox: Json | None = None  # the SandboxPolicy asked for (None: the server's configuration)
    approval_policy: str | None = None  # the AskForApproval asked for (None: the server's configuration)
    parent_thread_id: str | None = None  # a child thread: the thread whose worker it is
    agent_path: str | None = None  # a child thread: its mail path (/root/<name>)
    name: str | None = None  # thread/name/set (None: unnamed)
    archived: bool = False  # thread/archive: left out of thread/list unless it asks for archived threads
    approvals_reviewer: str | None = None  # ApprovalsReviewer asked for (None: "user"; _reviewer)

    @property
    def nickname(self) -> str | None:
        """A child thread's worker name (the last part of its path)."""
        return self.agent_path.rsplit("/", 1)[-1] if self.agent_path else None

    def to_json(self) -> Json:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Json) -> ThreadMeta:
        names = {field.name for field in attrs.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


@attrs.define
class TurnRecord:
    """One turn: its items (completed ones, in order) and how it ended."""

    id: str
    status: str = "inProgress"  # TurnStatus: inProgress | completed | interrupted | failed
    items: list[Json] = attrs.field(factory=list)
    error: Json | None = None
    started_at_ms: int | None = None
    completed_at_ms: int | None = None
    # How many history items the agent had when this turn ended, recorded when nothing
    # else ran (None: unknown); where thread/rollback cuts (``_rollback``). Not on the wire.
    history_end: int | None = None

    def to_json(self, view: ItemsView = "full") -> Json:
        if view == "notLoaded":
            items: list[Json] = []
        elif view == "summary":  # what codex's turn/completed carries: the last agent message
            messages = [item for item in self.items if item.get("type") == "agentMessage"]
            items = messages[-1:]
        else:
            items = list(self.items)
        started = self.started_at_ms
        completed = self.completed_at_ms
        return {
            "id": self.id,
            "rootTurnId": self.id,
            "items": items,
            "itemsView": view,
            "status": self.status,
            "error": self.error,
            "startedAt": started // 1000 if started is not None else None,
            "completedAt": completed // 1000 if completed is not None else None,
            "durationMs": completed - started if started is not None and completed is not None else None,
        }

    def stored(self) -> Json:
        """Its record line's ``turn`` (what ``attrs.asdict`` gives, field by field, in
        order), encoded at once by the caller: ``asdict`` copied every item, deeply, for
        each record line of every turn (issue 30)."""
        return {"id": self.id, "status": self.status, "items": self.items, "error": self.error,
                "started_at_ms": self.started_at_ms, "completed_at_ms": self.completed_at_ms,
                "history_end": self.history_end}

    @classmethod
    def from_stored(cls, data: Json, *, items: bool = True) -> TurnRecord:
        """The record of a stored ``turn`` (``items``: False leaves them out, as the
        thread index's reading needs only the turns' count and times)."""
        names = _TURN_FIELDS if items else _TURN_FIELDS_NO_ITEMS
        return cls(**{key: value for key, value in data.items() if key in names})


_TURN_FIELDS = frozenset(field.name for field in attrs.fields(TurnRecord))
_TURN_FIELDS_NO_ITEMS = _TURN_FIELDS - {"items"}


def thread_json(
    meta: ThreadMeta, status: ThreadStatus, *, path: str | None, turns: list[TurnRecord] | None = None,
    reasoning_effort: str | None = None, active_flags: Sequence[str] = (),
) -> Json:
    updated = meta.updated_at if meta.updated_at is not None else meta.created_at
    return {
        "id": meta.thread_id,
        "sessionId": meta.thread_id,
        "forkedFromId": meta.forked_from,
        "parentThreadId": meta.parent_thread_id,
        "preview": meta.preview,
        "ephemeral": meta.ephemeral,
        "modelProvider": meta.model_provider,
        "model": meta.model,
        "reasoningEffort": reasoning_effort,
        "createdAt": meta.created_at,
        "updatedAt": updated,
        "recencyAt": updated,
        "status": status_json(status, active_flags),
        "path": path,
        "cwd": meta.cwd,
        "cliVersion": CLI_VERSION,
        "originator": meta.originator,
        "source": _source(meta),
        "threadSource": None,
        "agentNickname": meta.nickname,
        "agentRole": None,
        "gitInfo": None,
        "name": meta.name,
        "projectId": None,
        "section": None,
        "sectionEnteredAt": None,
        "historyMode": "legacy",
        "turns": [turn.to_json("full") for turn in turns or []],
    }


def _source(meta: ThreadMeta) -> Json | str:
    """``SessionSource``: a child thread was spawned by its parent's agent."""
    if meta.parent_thread_id is None:
        return "appServer"
    depth = (meta.agent_path or "/root/x").count("/") - 1
    return {"subAgent": {"thread_spawn": {"parent_thread_id": meta.parent_thread_id, "depth": depth,
                                          "agent_path": meta.agent_path, "agent_nickname": meta.nickname,
                                          "agent_role": None}}}


def usage_breakdown(raw: object) -> Json:
    """A Responses ``usage`` object as a ``TokenUsageBreakdown``."""
    usage = raw if isinstance(raw, dict) else {}

    def count(value: object) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    input_details = _object(usage.get("input_tokens_details"))
    output_details = _object(usage.get("output_tokens_details"))
    inputs, outputs = count(usage.get("input_tokens")), count(usage.get("output_tokens"))
    return {
        "totalTokens": count(usage.get("total_tokens")) or inputs + outputs,
        "inputTokens": inputs,
        "cachedInputTokens": count(input_details.get("cached_tokens")),
        "cacheWriteInputTokens": 0,
        "outputTokens": outputs,
        "reasoningOutputTokens": count(output_details.get("reasoning_tokens")),
    }


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def add_usage(total: Json, last: Json) -> Json:
    return {key: total.get(key, 0) + value for key, value in last.items()}
