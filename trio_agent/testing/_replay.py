"""``replay()``: re-run a recorded session against its cassette and say whether the
agent still behaves the same.

Theory of operation: a ``ReplayServer`` (``gate_inputs=True``) serves the cassette,
and an agent -- built from the cassette's header, or the caller's ``config`` pointed
at the server -- is given the root agent's recorded prompts and steers again, each
once everything recorded before it has happened again (so a steer recorded between
two frames of a response lands between the same two frames). Every turn it prompted
is awaited and compared with the recorded ``turn.end`` (status and final message).
A recorded cancel (``input.cancel``) cancels its turn at the same point; a compaction
(``input.compact``), injected items (``input.inject``) and the application's mail
(``input.mail``) are asked for again there.
The agent closes when the inputs are given and its turns are done; then every
recorded observation must have happened. The first difference -- a request, a
connection, a turn's end, an input the agent no longer accepts, something the agent
never did -- is the ``ReplayResult``'s ``mismatch``; the run stops there.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, final

import attrs
import trio
import trio.testing

from .._cassette.format import Cassette, Observation, field_bool, field_int, field_str, frame_json
from ._replay_match import ReplayMatch, ReplayMismatch, RequestMatcher
from ._replay_server import ReplayServer

if TYPE_CHECKING:
    import trio_agent as ta

__all__ = ["ReplayResult", "ReplayedTurn", "replay", "replay_config"]

SETTLE_GRACE = 5.0  # after the agent closed: its last closes reach the server


@final
@attrs.frozen
class ReplayedTurn:
    """How a replayed turn ended (``turn_id`` is the recorded turn number)."""

    turn_id: int
    status: str  # completed | failed | cancelled
    final_message: str | None


@final
@attrs.frozen
class ReplayResult:
    """The outcome of ``replay()``: ``ok`` when the agent behaved as recorded, else
    ``mismatch`` says where it first differed (``check()`` raises it)."""

    mismatch: ReplayMismatch | None
    turns: tuple[ReplayedTurn, ...]
    events: tuple[ta.AgentEvent, ...]
    requests: int  # requests and frames the agent sent that matched the recording
    connections: int

    @property
    def ok(self) -> bool:
        """Whether the agent behaved as recorded (no mismatch)."""
        return self.mismatch is None

    def check(self) -> None:
        """Raise the ``ReplayMismatch`` when the replay differed."""
        if self.mismatch is not None:
            raise self.mismatch

    def summary(self) -> str:
        """One line: ``replay ok: ...`` or ``replay FAILED: <where it first differed>``."""
        if self.mismatch is not None:
            return f"replay FAILED: {self.mismatch.headline}"
        return (f"replay ok: {len(self.turns)} turn(s), {self.requests} request(s) on {self.connections} "
                "connection(s) matched the recording")


def replay_config(
    cassette: Cassette,
    server: ReplayServer,
    *,
    config: ta.AgentConfig | None = None,
    workspace: str | os.PathLike[str] | None = None,
    tools: ta.Tools | None = None,
) -> ta.AgentConfig:
    """The agent of a replay: ``config`` pointed at ``server`` (its other settings kept;
    ``record`` off), or, without one, the recorded session's own settings (model,
    thinking, fast mode, instructions, session id, store, history) with ``tools``
    (default: the built-in tools) in ``workspace`` (default: the current directory)."""
    import trio_agent as ta

    if config is not None:
        return attrs.evolve(config, responses=server.responses(config.responses), record=None)
    header = cassette.header
    return ta.AgentConfig(
        auth="replay-key", model=header.model, thinking=ta.Thinking(header.thinking), fast_mode=header.fast_mode,
        instructions=header.instructions, session_id=header.session_id,
        workspace=Path(workspace) if workspace is not None else Path.cwd(), tools=tools,
        responses=server.responses(),
    )


async def replay(
    cassette: Cassette | str | os.PathLike[str],
    *,
    config: ta.AgentConfig | None = None,
    workspace: str | os.PathLike[str] | None = None,
    tools: ta.Tools | None = None,
    timing: float = 0.0,
    match: ReplayMatch | RequestMatcher | Sequence[RequestMatcher] = ReplayMatch.INPUT,
    in_memory: bool = False,
    limit: float | None = None,
) -> ReplayResult:
    """Replay ``cassette`` (a ``Cassette`` or a path) and report whether the agent still
    behaves the same. See the module docstring; ``config``/``workspace``/``tools`` as
    in ``replay_config``, ``timing``/``match``/``in_memory`` as in ``ReplayServer``.

    ``limit`` (seconds, Trio's clock; None: no bound) ends a replay that stalls -- an
    agent waiting for a frame the cassette never sends, a server waiting for a request
    the agent never makes -- with a mismatch that names what it was waiting for.

    Raises ``CassetteError`` for a cassette that cannot be replayed; a behaviour
    difference is returned as ``result.mismatch``, not raised (``result.check()``).
    Cancelling the caller cancels the replay like any agent."""
    loaded = cassette if isinstance(cassette, Cassette) else Cassette.load(cassette)
    agent_workspace = config.resolved_workspace() if config is not None else Path(workspace or Path.cwd())
    server = ReplayServer(loaded, timing=timing, match=match, workspace=agent_workspace, in_memory=in_memory,
                          gate_inputs=True)
    run = _Run(loaded, server)
    with trio.move_on_after(math.inf if limit is None else limit) as bound:
        async with trio.open_nursery() as nursery:
            await nursery.start(run.serve)
            await run.drive(replay_config(loaded, server, config=config, workspace=workspace, tools=tools))
            nursery.cancel_scope.cancel()
    if bound.cancelled_caught:
        run.timed_out(limit)
    return run.result()


def recorded_warmup(cassette: Cassette) -> bool:
    """Whether the recorded root agent was opened to warm up (``open_agent``'s
    ``warmup``; ``trio-agent run`` opens with ``warmup=False``), read from its first
    WebSocket: a first frame that is no ``generate: false`` warmup says it was not (an
    agent that never warms up -- HTTPS, the generic profile, a resumed session -- replays
    the same either way). A first socket that failed says nothing: the next one's
    purpose does (``warmup_fallback`` after a warmup, ``initial`` without one)."""
    sockets = [c for c in cassette.connections() if c.websocket and c.opening.data.get("agent") == "/root"]
    if not sockets:
        return True
    sent = [step for step in sockets[0].steps if step.kind == "ws.send"]
    if sent:
        first = frame_json(sent[0]) or {}
        return first.get("generate") is False
    later = [c.opening.data.get("purpose") for c in sockets[1:]]
    return not later or later[0] == "warmup_fallback"


class _Run:
    def __init__(self, cassette: Cassette, server: ReplayServer) -> None:
        self._cassette = cassette
        self._server = server
        self._scope = trio.CancelScope()
        self._mismatch: ReplayMismatch | None = None
        self._events: list[ta.AgentEvent] = []
        self._turns: dict[int, ta.Turn] = {}
        self._ended: dict[int, ReplayedTurn] = {}
        ends = [o for o in cassette.turn_ends() if o.data.get("agent") == "/root"]
        self._recorded_ends = {field_int(o, "turn"): o for o in ends}

    def _fail(self, mismatch: ReplayMismatch) -> None:
        if self._mismatch is None:
            self._mismatch = mismatch
        self._scope.cancel()

    async def serve(self, *, task_status: trio.TaskStatus[ReplayServer] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await self._server.serve(task_status=task_status)
        except ReplayMismatch as exc:
            self._fail(exc)

    async def drive(self, config: ta.AgentConfig) -> None:
        import trio_agent as ta

        with self._scope:
            warmup = recorded_warmup(self._cassette)
            async with trio.open_nursery() as nursery, ta.open_agent(config, warmup=warmup) as agent:
                nursery.start_soon(self._collect, agent.events)
                for obs in self._cassette.inputs():
                    if obs.data.get("agent") == "/root":
                        await self._give(agent, obs, nursery)
                await self._settle()
            self._compare_turns()
            with trio.move_on_after(SETTLE_GRACE):
                await self._server.wait_done()
            self._check_unreached()

    async def _settle(self) -> None:
        """Before the agent closes: its turns have ended and the server has sent what it
        sends on its own (``ReplayServer.wait_quiet``), so closing never races the
        server's last recorded frames (a body's end after the terminal event)."""
        import trio_agent as ta

        for turn in tuple(self._turns.values()):
            with contextlib.suppress(ta.AgentError):
                await turn.result()
        await self._server.wait_quiet()

    async def _collect(self, events: ta.AgentEvents) -> None:
        async for event in events:
            self._events.append(event)

    async def _give(self, agent: ta.Agent, obs: Observation, nursery: trio.Nursery) -> None:
        import trio_agent as ta

        await self._server.wait_before(obs)
        if obs.kind == "input.inject":
            await self._inject(agent, obs)
            return
        if obs.kind == "input.mail":
            await self._mail(agent, obs, nursery)
            return
        recorded_turn = field_int(obs, "turn")
        if obs.kind == "input.compact":
            turn = await agent.compact()
            self._turns[recorded_turn] = turn
            nursery.start_soon(self._watch, recorded_turn, turn)
            self._server.input_delivered(obs)
            return
        if obs.kind == "input.prompt":
            images = obs.data.get("images")
            prompt = ta.Prompt(field_str(obs, "text"), images=tuple(images) if isinstance(images, list) else ())
            turn = await agent.prompt(prompt)
            self._turns[recorded_turn] = turn
            nursery.start_soon(self._watch, recorded_turn, turn)
            self._server.input_delivered(obs)
            return
        steered = self._turns.get(recorded_turn)
        what = "cancel" if obs.kind == "input.cancel" else "steer"
        if steered is None:
            self._fail(ReplayMismatch(f"replay mismatch at cassette line {obs.line}: the recorded {what} names "
                                      f"turn {recorded_turn}, which the agent had not been prompted for at that "
                                      "point", line=obs.line))
        elif obs.kind == "input.cancel":
            await self._cancel(steered, obs, nursery)
        elif not await steered.wait_running():
            self._fail(ReplayMismatch(f"replay mismatch at cassette line {obs.line}: turn {recorded_turn} ended "
                                      "without running, before the recorded steer", line=obs.line))
        else:
            await self._steer(steered, obs, nursery)

    async def _steer(self, turn: ta.Turn, obs: Observation, nursery: trio.Nursery) -> None:
        import trio_agent as ta

        text, interrupt = field_str(obs, "text"), field_bool(obs, "interrupt")
        try:
            if not interrupt:
                await turn.steer(text)
            else:
                # An interrupting steer returns once the interrupt is on the wire, which may
                # need frames recorded after it: it is given (queued) once its task blocks.
                nursery.start_soon(self._interrupting, turn, text, obs)
                await trio.testing.wait_all_tasks_blocked()
        except (ta.TurnNotSteerable, ta.SteerQueueFull) as exc:
            self._fail(ReplayMismatch(
                f"replay mismatch at cassette line {obs.line}: the agent no longer accepts the recorded steer "
                f"{text!r}: {exc}", line=obs.line,
            ))
            return
        self._server.input_delivered(obs)

    async def _inject(self, agent: ta.Agent, obs: Observation) -> None:
        """Inject the recorded items again; they must join (or wait) as they did."""
        items = obs.data.get("items")
        assert isinstance(items, list)
        how = await agent.inject(items)
        recorded = "joined" if field_bool(obs, "joined") else "queued"
        if how != recorded:
            self._fail(ReplayMismatch(
                f"replay mismatch at cassette line {obs.line}: the injected items were {recorded} when recorded "
                f"(joined the running turn, or waited for the next), {how} now", line=obs.line,
            ))
            return
        self._server.input_delivered(obs)

    async def _mail(self, agent: ta.Agent, obs: Observation, nursery: trio.Nursery) -> None:
        """Post the recorded mail again; it must start a turn (or not) as it did."""
        turn = await agent.post_mail(field_str(obs, "author"), field_str(obs, "text"),
                                     trigger_turn=field_bool(obs, "trigger_turn"))
        recorded = obs.data.get("turn")
        if (turn is None) != (recorded is None):
            self._fail(ReplayMismatch(
                f"replay mismatch at cassette line {obs.line}: the recorded mail "
                f"{'started turn ' + str(recorded) if recorded is not None else 'started no turn'}, "
                f"now it {'starts one' if turn is not None else 'starts none'}", line=obs.line,
            ))
            return
        if turn is not None and isinstance(recorded, int):
            self._turns[recorded] = turn
            nursery.start_soon(self._watch, recorded, turn)
        self._server.input_delivered(obs)

    async def _cancel(self, turn: ta.Turn, obs: Observation, nursery: trio.Nursery) -> None:
        """Cancel ``turn`` where the recording did. ``cancel()`` returns once the turn
        ended, which may need frames recorded after the cancel: it is given once its
        task blocks (the cancel has taken effect by then)."""
        if turn.status.value not in ("queued", "running"):
            self._fail(ReplayMismatch(
                f"replay mismatch at cassette line {obs.line}: the recorded cancel of turn {field_int(obs, 'turn')} "
                f"came while it ran, but it is {turn.status.value} now", line=obs.line,
            ))
            return
        nursery.start_soon(self._cancelling, turn, obs)
        await trio.testing.wait_all_tasks_blocked()
        self._server.input_delivered(obs)

    async def _cancelling(self, turn: ta.Turn, obs: Observation) -> None:
        import trio_agent as ta

        try:
            await turn.cancel()
        except ta.TurnNotCancellable as exc:
            self._fail(ReplayMismatch(
                f"replay mismatch at cassette line {obs.line}: the agent no longer accepts the recorded cancel: "
                f"{exc}", line=obs.line,
            ))

    async def _interrupting(self, turn: ta.Turn, text: str, obs: Observation) -> None:
        import trio_agent as ta

        try:
            await turn.steer(text, interrupt=True)
        except (ta.TurnNotSteerable, ta.SteerQueueFull) as exc:
            self._fail(ReplayMismatch(
                f"replay mismatch at cassette line {obs.line}: the agent no longer accepts the recorded "
                f"interrupting steer {text!r}: {exc}", line=obs.line,
            ))

    async def _watch(self, recorded_turn: int, turn: ta.Turn) -> None:
        import trio_agent as ta

        try:
            result = await turn.result()
            ended = ReplayedTurn(recorded_turn, "completed", result.final_message)
        except ta.TurnCancelled:
            ended = ReplayedTurn(recorded_turn, "cancelled", None)
        except ta.TurnFailed:
            ended = ReplayedTurn(recorded_turn, "failed", None)
        self._ended[recorded_turn] = ended
        recorded = self._recorded_ends.get(recorded_turn)
        if recorded is not None:
            self._server.turn_ended(recorded)

    def _compare_turns(self) -> None:
        for turn_id, recorded in sorted(self._recorded_ends.items()):
            ended = self._ended.get(turn_id)
            expected = (field_str(recorded, "status"), recorded.data.get("final_message"))
            actual = (ended.status, self._server.redact(ended.final_message)) if ended is not None else (
                "not run", None)
            if expected == actual:
                continue
            diff = "\n".join(difflib.unified_diff(
                _outcome_lines(*expected), _outcome_lines(*actual), "recorded", "replayed", lineterm="",
            ))
            self._fail(ReplayMismatch(
                f"replay mismatch at cassette line {recorded.line}: turn {turn_id} ended differently",
                line=recorded.line, diff=diff,
            ))
            return

    def _check_unreached(self) -> None:
        unreached = [o for o in self._server.unreached() if o.kind != "turn.end"]
        if not unreached:
            return
        first = unreached[0]
        where = f" on connection {first.conn}" if first.conn is not None else ""
        self._fail(ReplayMismatch(
            f"replay mismatch at cassette line {first.line}: the agent stopped before the recording did; "
            f"{len(unreached)} recorded observation(s) never happened, the first a {first.kind}{where}",
            line=first.line,
        ))

    def timed_out(self, limit: float | None) -> None:
        """The replay did not finish within ``limit``: say what it was waiting for."""
        pending = self._server.unreached()
        if not pending:
            waiting = "every recorded observation had happened; the agent did not close"
        else:
            waiting = f"cassette line {pending[0].line}: {_waiting_for(pending[0])}"
        self._fail(ReplayMismatch(
            f"replay mismatch: the replay did not finish within {limit:g} s; it was waiting for {waiting} "
            f"({len(pending)} recorded observation(s) had not happened)",
            line=pending[0].line if pending else None,
        ))

    def result(self) -> ReplayResult:
        turns = tuple(self._ended[turn_id] for turn_id in sorted(self._ended))
        return ReplayResult(self._mismatch, turns, tuple(self._events), self._server.requests_matched,
                            self._server.connections_served)


def _waiting_for(obs: Observation) -> str:
    """What a replay stalled on, said from the first recorded observation that did not happen."""
    conn = f" on connection {obs.conn}" if obs.conn is not None else ""
    turn = obs.data.get("turn")
    phrases = {
        "ws.send": f"the agent to send a frame{conn}",
        "http.request": f"the agent to send an HTTPS request (connection {obs.conn})",
        "ws.open": f"the agent to open a WebSocket (connection {obs.conn})",
        "ws.error": f"the agent to open a WebSocket (connection {obs.conn}, refused as recorded)",
        "ws.close": f"the agent to close connection {obs.conn}" if obs.data.get("by") == "client"
        else f"the recorded close of connection {obs.conn}",
        "http.end": f"the agent to finish reading{conn}",
        "input.prompt": f"the recorded prompt of turn {turn} to be given (after everything recorded before it)",
        "input.steer": f"the recorded steer of turn {turn} to be given (after everything recorded before it)",
        "input.cancel": f"the recorded cancel of turn {turn} to be given (after everything recorded before it)",
        "input.compact": f"the recorded compaction (turn {turn}) to be asked for (after everything before it)",
        "input.inject": "the recorded injected items to be given (after everything recorded before it)",
        "input.mail": "the recorded mail to be posted (after everything recorded before it)",
        "turn.end": f"turn {turn} to end",
    }
    return phrases.get(obs.kind, f"a {obs.kind}{conn}")


def _outcome_lines(status: object, message: object) -> list[str]:
    lines = [f"status: {status}"]
    if isinstance(message, str):
        lines += ["final message:", *message.splitlines()]
    return lines
