"""``thread/rollback`` (drop the last N turns) and ``thread/revert`` (drop a turn and
every later one): the agent's history and the thread record shrink together.

Theory of operation (issue 22). Codex 0.171's schema has ``thread/revert {threadId,
beforeTurnId}`` (answered with the thread, ``turns: []``); earlier codex versions, and
clients written for them, send ``thread/rollback {threadId, numTurns}`` (answered with
the thread and its remaining turns). Both cut the thread at the start of a turn:

- *Where.* Each turn record keeps ``history_end``, the agent's history length when the
  turn ended, recorded by the pump when nothing else ran (``_pump.Pump._turn_ended``).
  Keeping the first K turns keeps the history up to the end of turn K (for K = 0: the
  start), plus the context messages the next turn began with (the first turn's
  permissions and environment messages, a permissions message after a sandbox or
  policy change): they describe settings the thread still runs with. When turn K's end
  was not recorded (it ended while the next turn was already queued -- a compaction
  followed by a prompt -- or the record is older than cut points), the cut is found
  as codex finds its own, by user messages: every prompt and steer of the dropped
  turns, newest first, must be in the history after the last compaction summary, and
  the cut is at the first dropped turn's prompt.
- *Refused* (-32600, nothing changed): while a turn runs or waits (interrupt it, or
  wait for its ``turn/completed``); past a compaction (the history before it was
  replaced by its summary, so the cut point no longer exists); when neither way finds
  the cut (a dropped turn without a prompt, such as an automatic one, whose start was
  not recorded); for an unloaded thread (resume it first).
- *How.* The history is rewritten through the agent's ledger -- the one writer of its
  history, whose rewrites the model client (its response chain restarts where the
  server's copy no longer matches) and the rollout (a ``compacted`` line with the new
  history, reason ``rollback``) both follow -- so the next request, a cold resume and a
  fork all see the shorter history. The record gets a ``rollback`` line (``_store``),
  the thread's turns shrink in memory, and the thread's subscribers get
  ``thread/reverted``. Token usage already spent stays counted; files the dropped
  turns changed stay changed (as in codex: only the conversation goes back).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._session.summary import is_summary
from ._connection import Connection, Reply
from ._jsonrpc import InvalidParams, InvalidRequest
from ._outs import Out
from ._params import Params, shown

if TYPE_CHECKING:
    from .._runtime import Agent
    from ._context import ServerContext
    from ._shapes import TurnRecord
    from ._thread_state import ThreadState

__all__ = ["METHODS"]

Json = dict[str, Any]
# The texts the runtime's context messages start with (_session.context): the
# permissions developer message and the environment user message.
_PERMISSIONS_PREFIX = "<permissions instructions>"
_ENVIRONMENT_PREFIX = "<environment_context>"


def _texts(item: Json) -> list[str]:
    content = item.get("content")
    parts = content if isinstance(content, list) else []
    return [part.get("text", "") for part in parts if isinstance(part, dict) and isinstance(part.get("text"), str)]


def _is_context(item: Json) -> bool:
    if item.get("type") != "message":
        return False
    texts = _texts(item)
    if not texts:
        return False
    if item.get("role") == "developer":
        return all(text.startswith(_PERMISSIONS_PREFIX) for text in texts)
    return item.get("role") == "user" and texts[-1].startswith(_ENVIRONMENT_PREFIX)


def _user_text(item: Json) -> str | None:
    """The text a prompt or steer put in history (its first text part), else None."""
    if item.get("type") != "message" or item.get("role") != "user" or _is_context(item):
        return None
    texts = _texts(item)
    return texts[0] if texts else None


def _asked(turn: TurnRecord) -> list[str]:
    """The texts of a turn's prompt and steers, in order (``userMessage`` items)."""
    return ["\n".join(part.get("text", "") for part in item.get("content", []) if part.get("type") == "text")
            for item in turn.items if item.get("type") == "userMessage"]


def _found_start(dropped: list[TurnRecord], history: list[Json]) -> int | None:
    """Where the first dropped turn's prompt is in ``history``, found by matching every
    prompt and steer of the dropped turns, newest first, against the user messages after
    the last compaction summary (codex finds its cut by user messages too); None when
    one is missing or the first dropped turn has no prompt."""
    expected = [text for turn in dropped for text in _asked(turn)]
    if not dropped or not _asked(dropped[0]):
        return None
    floor = max((i + 1 for i, item in enumerate(history) if item.get("type") == "compaction" or is_summary(item)),
                default=0)  # after a remote compaction's item, or a local one's summary (its copies are before)
    index = len(history)
    for text in reversed(expected):
        index = next((i for i in range(index - 1, floor - 1, -1) if _user_text(history[i]) == text), -1)
        if index < 0:
            return None
    return index


def _cut_point(state: ThreadState, history: list[Json], keep: int) -> int:
    """How many history items keeping the first ``keep`` turns keeps (or ``InvalidRequest``)."""
    turns = state.mapper.turns
    for turn in turns[keep:]:
        if any(item.get("type") == "contextCompaction" for item in turn.items):
            raise InvalidRequest(
                f"cannot roll back thread {state.thread_id} past turn {turn.id}: it compacted the history, so the "
                "history before it exists only as its summary; roll back fewer turns, or fork an older thread")
    end = 0 if keep == 0 else turns[keep - 1].history_end
    if end is not None and end <= len(history):
        while end < len(history) and _is_context(history[end]):
            end += 1
        return end
    found = _found_start(turns[keep:], history)
    if found is None:
        raise InvalidRequest(
            f"cannot roll back thread {state.thread_id} to after turn {turns[keep - 1].id}: where its history ends "
            "was not recorded (it ended while another turn was queued, or its record predates rollbacks) and the "
            "prompts of the turns to drop are not all in the history; roll back to a later turn, or start a new "
            "thread")
    return found


def _rewrite_history(agent: Agent, items: list[Json]) -> None:
    """Replace the agent's history. The ledger's rewrite is the one path its model client
    and rollout follow (there is no public runtime call for it yet)."""
    agent._ledger._rewrite("rollback", items)


def _roll_back(server: ServerContext, state: ThreadState, agent: Agent, keep: int, method: str) -> None:
    stats = agent.statistics()
    if stats.running_turn is not None or stats.turns_queued or any(
            turn.status == "inProgress" for turn in state.mapper.turns):
        raise InvalidRequest(f"{method}: thread {state.thread_id} is running a turn; call it after the turn's "
                             "turn/completed (or turn/interrupt it first)")
    history = list(server.threads.read(state.thread_id).history)
    cut = _cut_point(state, history, keep)
    dropped = {id(turn) for turn in state.mapper.turns[keep:]}
    _rewrite_history(agent, history[:cut])
    del state.mapper.turns[keep:]
    for agent_turn_id, mapper in list(state.mapper.by_agent_turn.items()):
        if id(mapper.record) in dropped:
            del state.mapper.by_agent_turn[agent_turn_id]
    meta = state.meta
    meta.updated_at = server.clock.now_s()
    if keep == 0:
        meta.preview = ""
    if not meta.ephemeral:
        server.store.roll_back(meta.thread_id, keep)
        server.store.update(meta)


def _reverted(server: ServerContext, state: ThreadState) -> None:
    server.publish(state, [Out("thread/reverted", {"threadId": state.thread_id})])


async def thread_rollback(server: ServerContext, conn: Connection, params: Params) -> Reply:
    thread_id = params.string("threadId")
    count = params.opt_int("numTurns", minimum=1)
    if count is None:
        raise InvalidParams("thread/rollback: missing required field `numTurns` (how many of the last turns to drop)")
    state, agent = server.loaded_state(thread_id)
    async with state.lock:
        turns = len(state.mapper.turns)
        if count > turns:
            raise InvalidParams(f"thread/rollback: `numTurns` is {count}, but thread {thread_id} has {turns} turns")
        _roll_back(server, state, agent, turns - count, params.method)
    return Reply({"thread": server.thread_view(state, turns=True)}, after=lambda: _reverted(server, state))


async def thread_revert(server: ServerContext, conn: Connection, params: Params) -> Reply:
    thread_id = params.string("threadId")
    before = params.string("beforeTurnId")
    state, agent = server.loaded_state(thread_id)
    async with state.lock:
        ids = [turn.id for turn in state.mapper.turns]
        if before not in ids:
            raise InvalidParams(f"thread/revert: `beforeTurnId` {shown(before)} is not a turn of thread {thread_id}")
        _roll_back(server, state, agent, ids.index(before), params.method)
    thread = server.thread_view(state, turns=False)
    return Reply({"thread": thread, "turnsBackwardsCursor": None, "itemsBackwardsCursor": None},
                 after=lambda: _reverted(server, state))


METHODS = {
    "thread/rollback": thread_rollback,
    "thread/revert": thread_revert,
}
