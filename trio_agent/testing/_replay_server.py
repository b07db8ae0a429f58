"""``ReplayServer``: a cassette served as a scripted fake Responses server.

Theory of operation: the server is a ``FakeResponsesServer`` (loopback or in
memory) whose script is the cassette. Each recorded connection, in the order the
agent opened them, is matched to the next connection the agent opens now and
played by its own task:

- what the agent sent then (``ws.send``, ``http.request``) is awaited and compared
  (``Matcher``): a difference raises ``ReplayMismatch`` with the diff;
- what the server sent then (the handshake, ``ws.recv`` frames, the HTTP head and
  each ``sse.event``) is sent again, frame by frame, after the recorded gap times
  ``timing`` (0: no delays; Trio's clock, so ``MockClock`` replays exactly);
- a close is replayed as it happened: the server closes with the recorded code (a
  dropped TCP connection, code 1006, is dropped again), a body cut off by the server
  is cut off again, and a close by the agent is awaited.

With ``gate_inputs=True`` (what ``replay()`` uses) the server also keeps the
recorded order between the session's input and the model's frames: a server step
recorded after a prompt or steer waits until that input was given again
(``input_delivered``), and ``wait_before`` lets the driver wait until everything
recorded before an input has happened. The first mismatch stops the server: it is
kept as ``mismatch`` and ``serve`` raises it (a plain ``ReplayMismatch``, never
wrapped in a group).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import trio

from .._cassette.format import (
    INPUT_KINDS,
    Cassette,
    Observation,
    RecordedConnection,
    field_int,
    field_str,
    frame_json,
    frame_text,
)
from ._http import FakeHttpRequest, read_http_request
from ._replay_match import Matcher, ReplayMatch, ReplayMismatch, RequestMatcher, pretty
from ._replay_progress import Pace, Progress
from ._server import ClientDisconnected, FakeConnection, FakeResponsesServer, RawConnection

if TYPE_CHECKING:
    import trio_agent as ta

__all__ = ["ReplayServer"]

# Headers a replay does not repeat: they describe the recorded connection itself.
_HOP_HEADERS = frozenset({
    "connection", "content-length", "content-type", "content-encoding", "transfer-encoding", "keep-alive",
    "upgrade", "date", "server", "sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-protocol",
})
_ABNORMAL_CLOSURE = 1006


class ReplayServer:
    """Serves ``cassette`` to an agent (see the module docstring).

    ``timing``: scale of the recorded gaps between frames (0, the default: none; 1.0:
    as recorded). ``match``: what must be equal (``ReplayMatch.INPUT``: the input
    items; ``ReplayMatch.BODY``: whole bodies; a ``RequestMatcher`` or several: what they
    say of the normalised bodies). ``workspace``: the replaying agent's
    workspace (default: the recorded one), for path normalisation. ``in_memory``: no
    socket at all (use ``responses()``, which sets the dialer). ``gate_inputs``: keep
    the recorded order between the root agent's inputs and the server's frames; only
    for a driver that gives the inputs and reports them (``wait_before``,
    ``input_delivered``, ``turn_ended``), as ``replay()`` does.
    """

    def __init__(
        self,
        cassette: Cassette | str | os.PathLike[str],
        *,
        timing: float = 0.0,
        match: ReplayMatch | RequestMatcher | Sequence[RequestMatcher] = ReplayMatch.INPUT,
        workspace: str | os.PathLike[str] | None = None,
        in_memory: bool = False,
        gate_inputs: bool = False,
    ) -> None:
        self.cassette = cassette if isinstance(cassette, Cassette) else Cassette.load(cassette)
        if isinstance(timing, bool) or not isinstance(timing, int | float) or not 0 <= timing < math.inf:
            raise ValueError(f"timing must be a finite number >= 0 (0: no delays, 1.0: as recorded), got {timing!r}")
        if not (isinstance(match, ReplayMatch) or callable(match)
                or (isinstance(match, Sequence) and not isinstance(match, str) and all(map(callable, match)))):
            raise ValueError(f"match must be a ReplayMatch, a matcher function or a sequence of them, got {match!r}")
        header = self.cassette.header
        replay_workspace = os.path.realpath(workspace) if workspace is not None else header.workspace
        self._matcher = Matcher(match, recorded_workspace=header.workspace, workspace=replay_workspace)
        self._timing = float(timing)
        self._fake = FakeResponsesServer.in_memory() if in_memory else FakeResponsesServer()
        # With gate_inputs, the root agent's prompts, steers and turn ends are driven
        # (``replay()``); everything else without a connection happens on its own.
        root = [o for o in self.cassette.observations
                if o.kind in (*INPUT_KINDS, "turn.end") and o.data.get("agent") == "/root"]
        driven = {o.line for o in root} if gate_inputs else set()
        self._progress = Progress(self.cassette, [o.line for o in root if o.kind != "turn.end" and o.line in driven])
        self._by_line = {o.line: o for o in self.cassette.observations}
        self._connections = self.cassette.connections()
        https = [c.conn for c in self._connections if not c.websocket]
        self._https_number = {conn: number for number, conn in enumerate(https, start=1)}
        for obs in self.cassette.observations:
            if obs.conn is None and obs.line not in driven:
                self._progress.done(obs.line)
        self.mismatch: ReplayMismatch | None = None
        self.requests_matched = 0
        self.connections_served = 0

    # -- where the agent connects --------------------------------------------------------

    @property
    def url(self) -> str:
        """The ``websocket_url`` for the agent."""
        return self._fake.url

    @property
    def http_base_url(self) -> str:
        """The ``api_base_url`` for the HTTPS transport."""
        return self._fake.http_base_url

    @property
    def is_in_memory(self) -> bool:
        """Whether the server is reached only through ``dial`` (``in_memory=True``)."""
        return self._fake.is_in_memory

    def responses(self, base: ta.Responses | None = None) -> ta.Responses:
        """``base`` (default: ``ta.Responses()`` with the recorded store, history,
        attempt limit and profile) pointed at this server, with the recorded transport (its own
        ``http_client`` and ``dialer`` are dropped: the agent dials this server)."""
        import attrs

        import trio_agent as ta

        header = self.cassette.header
        if base is None:
            base = ta.Responses(store=header.store, history=ta.History(header.history),
                                max_attempts=header.max_attempts, profile=ta.Profile(header.profile))
        return attrs.evolve(
            base, transport=ta.Transport(self.cassette.transport), websocket_url=self.url,
            api_base_url=self.http_base_url, http_client=None,
            dialer=self._fake.dial if self.is_in_memory else None,
        )

    # -- serving -------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[ReplayServer] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; raises ``ReplayMismatch`` at the first mismatch."""
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._fake.serve)
                nursery.start_soon(self._accept_all, nursery)
                task_status.started(self)
        except BaseException:
            if self.mismatch is not None:
                raise self.mismatch from None  # the mismatch, not the cancellations it caused
            raise

    def _fail(self, mismatch: ReplayMismatch) -> ReplayMismatch:
        if self.mismatch is None:
            self.mismatch = mismatch
        return self.mismatch

    async def _accept_all(self, nursery: trio.Nursery) -> None:
        recorded = self._connections
        for connection in recorded:
            raw = await self._fake.accept_raw()
            self.connections_served += 1
            nursery.start_soon(self._play, connection, raw)
        await self._fake.accept_raw()
        raise self._fail(ReplayMismatch(
            f"replay mismatch: the agent opened connection {len(recorded) + 1}, but the cassette recorded only "
            f"{len(recorded)}"
        ))

    async def _play(self, connection: RecordedConnection, raw: RawConnection) -> None:
        if connection.websocket:
            await self._play_websocket(connection, raw)
        else:
            await self._play_http(connection, raw)

    # -- the driver's side (replay()) ----------------------------------------------------

    def redact(self, value: object) -> Any:
        """``value`` with every credential the replay knows as ``<redacted>`` (what a diff shows)."""
        return self._matcher.redact(value)

    async def wait_before(self, obs: Observation) -> None:
        """Wait until everything recorded before ``obs`` has happened again."""
        await self._progress.all_before(obs.line)

    def input_delivered(self, obs: Observation) -> None:
        """The input at ``obs`` was given to the agent again."""
        self._progress.input_delivered(obs.line)

    def turn_ended(self, obs: Observation) -> None:
        """Tell the server the replayed agent reached the recorded ``turn.end`` ``obs``."""
        self._progress.done(obs.line)

    async def wait_quiet(self) -> None:
        """Wait until the server has nothing left to send on its own: on every recorded
        connection the next step not yet replayed (if any) is the agent's -- a request
        or frame to send, a connection to open or close. ``replay()`` waits for this
        before it closes the agent: what the recording shows the server sent before the
        agent closed (a body's end, a last frame after the turn's terminal one) is sent
        again before the agent closes, whichever task Trio happens to run first."""
        while not all(self._agent_moves_next(connection) for connection in self._connections):
            await self._progress.changed()

    def _agent_moves_next(self, connection: RecordedConnection) -> bool:
        for step in (connection.opening, *connection.steps):
            if not self._progress.is_done(step.line):
                return step is connection.opening or not _server_side(step)
        return True

    async def wait_done(self) -> None:
        """Wait until every recorded observation has happened again."""
        await self._progress.all_done()

    def unreached(self) -> list[Observation]:
        """The recorded observations that have not happened (yet)."""
        return [self._by_line[line] for line in self._progress.pending()]

    # -- WebSocket -----------------------------------------------------------------------

    async def _play_websocket(self, connection: RecordedConnection, raw: RawConnection) -> None:
        opening = connection.opening
        pace = Pace(self._timing, opening)
        await self._progress.inputs_before(opening.line)
        if opening.kind == "ws.error":
            await self._refuse(opening, raw)
            self._progress.done(opening.line)
            return
        conn = await raw.accept(headers=_replayable(opening.data.get("response_headers")))
        self._matcher.secrets.add_headers(conn.handshake.headers.items())
        self._progress.done(opening.line)
        pace.stepped(opening)
        for step in connection.steps:
            if step.kind == "ws.send":
                await self._expect_frame(connection, conn, step)
            elif step.kind == "ws.recv":
                await self._server_step(pace, step)
                await self._send_frame(connection, conn, step)
            elif step.data.get("by") == "server":
                await self._server_step(pace, step)
                await self._close(conn, step)
            else:
                await self._expect_close(connection, conn, step)
            self._progress.done(step.line)
            pace.stepped(step)

    async def _server_step(self, pace: Pace, step: Observation) -> None:
        await self._progress.inputs_before(step.line)
        await pace.wait(step)

    async def _refuse(self, opening: Observation, raw: RawConnection) -> None:
        status = opening.data.get("status")
        if not isinstance(status, int):
            await raw.drop()  # refused, reset or timed out: the agent sees a failed connection
            return
        body = opening.data.get("body")
        await raw.reject(status, body if isinstance(body, str) else "", _replayable(opening.data.get("headers")))

    async def _expect_frame(self, connection: RecordedConnection, conn: FakeConnection, step: Observation) -> None:
        expected = _frame_json(step)
        number = sum(1 for s in connection.steps if s.kind == "ws.send" and s.line <= step.line)
        what = f"frame {number} the agent sent on connection {connection.conn} (WebSocket)"
        try:
            actual = await conn.next_request()
        except ClientDisconnected:
            raise self._fail(ReplayMismatch(
                f"replay mismatch at cassette line {step.line}: the agent closed connection {connection.conn} "
                f"where the cassette has it send {_describe(expected)}", line=step.line,
            )) from None
        try:
            self._matcher.check(expected, actual, what=what, line=step.line)
        except ReplayMismatch as exc:
            raise self._fail(exc) from None
        self.requests_matched += 1

    async def _send_frame(self, connection: RecordedConnection, conn: FakeConnection, step: Observation) -> None:
        text = frame_text(step)
        message: str | bytes = text if text is not None else _bytes(step)
        try:
            await conn.send_text(message)
        except ClientDisconnected:
            raise self._fail(ReplayMismatch(
                f"replay mismatch at cassette line {step.line}: the agent closed connection {connection.conn} "
                "while the cassette still had frames for it", line=step.line,
            )) from None

    async def _close(self, conn: FakeConnection, step: Observation) -> None:
        code = step.data.get("code")
        if not isinstance(code, int) or code == _ABNORMAL_CLOSURE:
            await conn.drop()
            return
        reason = step.data.get("reason")
        try:
            await conn.close(code, reason if isinstance(reason, str) else None)
        except ClientDisconnected:
            pass  # the agent closed it first: closed either way

    async def _expect_close(self, connection: RecordedConnection, conn: FakeConnection, step: Observation) -> None:
        try:
            actual = await conn.next_request()
        except ClientDisconnected:
            return
        raise self._fail(ReplayMismatch(
            f"replay mismatch at cassette line {step.line}: where the agent closed connection {connection.conn}, "
            "it now sends another frame:", line=step.line,
            diff="\n".join("+" + line for line in pretty(self._matcher.redact(actual))),
        ))

    # -- HTTPS ---------------------------------------------------------------------------

    async def _play_http(self, connection: RecordedConnection, raw: RawConnection) -> None:
        opening = connection.opening
        pace = Pace(self._timing, opening)
        what = f"HTTPS request {self._https_number[connection.conn]} (connection {connection.conn})"
        try:
            request = await read_http_request(raw.stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise self._fail(ReplayMismatch(
                f"replay mismatch at cassette line {opening.line}: the agent opened connection "
                f"{connection.conn} but sent no request; the cassette has {what}", line=opening.line,
            )) from None
        expected = opening.data.get("body")
        assert isinstance(expected, dict)
        self._matcher.secrets.add_headers(request.headers.items())
        try:
            self._matcher.check(expected, request.body, what=what, line=opening.line)
        except ReplayMismatch as exc:
            raise self._fail(exc) from None
        self.requests_matched += 1
        self._progress.done(opening.line)
        pace.stepped(opening)
        streaming = False
        for step in connection.steps:
            await self._server_step(pace, step)
            try:
                streaming = await self._http_step(request, step, streaming)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise self._fail(ReplayMismatch(
                    f"replay mismatch at cassette line {step.line}: the agent closed connection "
                    f"{connection.conn} while the cassette still had events for it", line=step.line,
                )) from None
            self._progress.done(step.line)
            pace.stepped(step)

    async def _http_step(self, request: FakeHttpRequest, step: Observation, streaming: bool) -> bool:
        if step.kind == "http.response":
            status = field_int(step, "status")
            headers = _replayable(step.data.get("headers"))
            if status // 100 == 2:
                await request.start_stream(status=status, headers=headers)
                return True
            body = step.data.get("body")
            await request.respond(status, body if isinstance(body, str) else "", headers)
            return False
        if step.kind == "sse.event":
            await request.send_data(frame_text(step) or "")
            return streaming
        how = field_str(step, "how")
        if how == "eof":
            if streaming:
                await request.finish()
        elif how == "error" and "timeout" not in str(step.data.get("error_class", "")):
            await request.drop()  # the server cut it off: cut it off again
        else:
            await _wait_closed(request.stream)  # the agent gave up (or timed out): wait for it
        return False


def _server_side(step: Observation) -> bool:
    """Whether the server makes this step on its own (the agent only receives it)."""
    if step.kind in ("ws.recv", "http.response", "sse.event"):
        return True
    if step.kind == "ws.close":
        return step.data.get("by") == "server"
    if step.kind == "http.end":
        how = step.data.get("how")
        return how == "eof" or (how == "error" and "timeout" not in str(step.data.get("error_class", "")))
    return False


def _replayable(headers: object) -> list[tuple[str, str]]:
    if not isinstance(headers, dict):
        return []
    return [(name, value) for name, value in headers.items()
            if isinstance(value, str) and name.lower() not in _HOP_HEADERS and value != "<redacted>"]


def _frame_json(step: Observation) -> dict[str, Any]:
    value = frame_json(step)
    # A recorded frame that is not a JSON object (a hand-edited cassette) is compared whole.
    return dict(value) if value is not None else {"type": "<not a JSON object>", "frame": step.data.get("text")}


def _bytes(step: Observation) -> bytes:
    import base64

    return base64.b64decode(field_str(step, "bytes"))


def _describe(frame: dict[str, Any]) -> str:
    kind = frame.get("type", "a request")
    if frame.get("generate") is False:
        return f"{kind} (a warmup)"
    return str(kind)


async def _wait_closed(stream: trio.abc.Stream) -> None:
    try:
        while await stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
