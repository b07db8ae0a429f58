"""``trio-agent exec``'s client side: one turn driven through an in-process app server.

Theory of operation. As the real ``codex exec`` is an in-process client of its app
server, ``trio-agent exec`` serves one connection of an ``AppServer`` (``_serve``) over
an in-memory message channel pair (``memory_channels``: JSON-RPC text, bounded both
ways) and speaks the v2 protocol to it: ``initialize``, ``thread/start`` (or
``thread/resume`` of a thread of the same home -- one that ``exec`` or ``serve``
started), ``turn/start``, then notifications until that turn's ``turn/completed``.
The threads, rollouts and items are therefore exactly what ``trio-agent serve`` shows
its clients. ``ExecEvents`` (``_events``) turns the notifications into exec JSONL
events, written to stdout as they come.

Server requests: exec has nobody to ask. Approvals, ``item/tool/call`` and the rest
are refused with an error (-32000), as codex exec does, so an approval policy other
than ``never`` denies what would need asking.

Signals: the first SIGINT/SIGTERM interrupts the running turn (``turn/interrupt``:
its commands are killed, its rollout flushed) and the turn ends with ``turn.failed``
{"error": {"message": "turn interrupted by SIGTERM"}}, exit 128 + signal. (codex exec
prints nothing on SIGINT and exits 1, and dies of SIGTERM unhandled; one terminal
event per turn is this project's rule.) A signal before the turn started ends the
command with the same status; a second signal exits at once (``cli._signals``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from .._signals import Interrupts, open_interrupts
from ._events import ExecEvents, TurnOutcome
from ._output import Output, OutputClosed

__all__ = ["ExecFailed", "ExecRequest", "ExecResult", "MemoryChannel", "drive_turn", "memory_channels",
           "sandbox_policy", "turn_params"]

Json = dict[str, Any]
CHANNEL_CAPACITY = 64  # messages in flight each way (the server's own queue is bounded too)
REFUSAL = -32000


class MemoryChannel:
    """A ``MessageChannel`` over Trio memory channels: one JSON-RPC message per item."""

    def __init__(self, send: trio.MemorySendChannel[str], receive: trio.MemoryReceiveChannel[str]) -> None:
        self._send = send
        self._receive = receive

    async def send(self, text: str) -> None:
        await self._send.send(text)

    async def send_batch(self, texts: list[str]) -> None:
        for text in texts:
            await self._send.send(text)

    async def receive(self) -> str:
        return await self._receive.receive()

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()


def memory_channels(capacity: int = CHANNEL_CAPACITY) -> tuple[MemoryChannel, MemoryChannel]:
    """Two connected ends (client, server); closing one ends the other's ``receive``."""
    to_server, server_inbox = trio.open_memory_channel[str](capacity)
    to_client, client_inbox = trio.open_memory_channel[str](capacity)
    return MemoryChannel(to_server, client_inbox), MemoryChannel(to_client, server_inbox)


class ExecFailed(Exception):
    """The turn could not start (a request refused, the server gone): said as an exec
    ``error`` event and on stderr, exit status 1."""


@attrs.frozen
class ExecRequest:
    """What one ``trio-agent exec`` asks for (``_command`` builds it from the argv)."""

    prompt: str
    images: tuple[str, ...] = ()
    resume: str | None = None  # a thread id
    resume_last: bool = False  # the most recently updated thread (of ``cwd``, unless ``resume_all``)
    resume_all: bool = False
    cwd: str = "."  # the workspace of a new thread (resolved: --cd, else the current directory)
    cd_given: bool = False
    model: str | None = None
    sandbox: str | None = None  # a SandboxMode name
    writable_roots: tuple[str, ...] = ()
    network_access: bool | None = None
    approval: str = "never"
    effort: str | None = None
    output_schema: Json | None = None
    ephemeral: bool = False
    instructions: str | None = None  # a new thread's base instructions (-c instructions)
    developer_instructions: str | None = None
    web_search: bool = True  # web__run in the thread's tools (-c web_search="live"; "disabled"/"cached": without)
    client_name: str = "trio_agent_exec"
    version: str = "0"


class _Client:
    """The exec end of the connection: requests with ids; every other message goes to
    ``on_message`` in the order it arrived."""

    def __init__(self, channel: MemoryChannel, on_message: Callable[[Json], Awaitable[None]]) -> None:
        self._channel = channel
        self._on_message = on_message
        self._ids = itertools.count(1)

    async def send_request(self, method: str, params: Json) -> int:
        request_id = next(self._ids)
        await self._channel.send(json.dumps({"id": request_id, "method": method, "params": params}))
        return request_id

    async def notify(self, method: str) -> None:
        await self._channel.send(json.dumps({"method": method}))

    async def refuse(self, request_id: object, message: str) -> None:
        await self._channel.send(json.dumps({"id": request_id, "error": {"code": REFUSAL, "message": message}}))

    async def request(self, method: str, params: Json) -> Json:
        """Send a request and read until its answer; ``ExecFailed`` for an error."""
        request_id = await self.send_request(method, params)
        while True:
            message = await self._next(method)
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    error = message["error"] if isinstance(message["error"], dict) else {}
                    said = str(error.get("message", "refused"))
                    raise ExecFailed(said if said.startswith(f"{method}:") else f"{method}: {said}")
                result = message.get("result")
                return result if isinstance(result, dict) else {}
            await self._on_message(message)

    async def read_until(self, done: Callable[[], bool], waiting_for: str) -> None:
        while not done():
            await self._on_message(await self._next(waiting_for))

    async def _next(self, waiting_for: str) -> Json:
        try:
            text = await self._channel.receive()
        except (trio.EndOfChannel, trio.BrokenResourceError):
            raise ExecFailed(f"the app server closed the connection while exec waited for {waiting_for}") from None
        message = json.loads(text)
        return message if isinstance(message, dict) else {}


class _Turn:
    """One exec run: the client, the event mapping and what a signal must reach."""

    def __init__(self, request: ExecRequest, output: Output) -> None:
        self.request = request
        self.output = output
        self.events: ExecEvents | None = None
        self.client: _Client | None = None
        self.failure: str | None = None  # why the turn could not start (or the connection ended)

    async def on_message(self, message: Json) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            return  # the answer to a request nobody waits for (turn/interrupt)
        assert self.client is not None
        if "id" in message:
            await self.client.refuse(message["id"], f"{method} is not supported in exec mode (nobody can answer it)")
            print(f"trio-agent exec: refused the server's {method} request: exec cannot ask anyone",
                  file=sys.stderr, flush=True)
            return
        if self.events is not None:
            await self.output.write(self.events.on_notification(method, message.get("params")))

    async def interrupt(self, interrupts: Interrupts, cancel: trio.CancelScope) -> None:
        events, client = self.events, self.client
        if events is None or client is None or events.turn_id is None or events.outcome is not None:
            cancel.cancel()  # no turn runs yet: stop where we are
            return
        await client.send_request("turn/interrupt", {"threadId": events.thread_id, "turnId": events.turn_id})


async def _open_thread(client: _Client, request: ExecRequest) -> str:
    settings: Json = {"approvalPolicy": request.approval}
    if request.sandbox is not None:
        settings["sandbox"] = request.sandbox
    thread_id = request.resume
    if thread_id is None and request.resume_last:
        thread_id = await _last_thread(client, request)
    if thread_id is not None:
        response = await client.request("thread/resume", {"threadId": thread_id, "excludeTurns": True, **settings})
    else:
        params: Json = {"ephemeral": request.ephemeral, "cwd": request.cwd, **settings}
        for name, value in (("model", request.model), ("baseInstructions", request.instructions),
                            ("developerInstructions", request.developer_instructions)):
            if value is not None:
                params[name] = value
        response = await client.request("thread/start", params)
    thread = response.get("thread")
    if not isinstance(thread, dict) or not isinstance(thread.get("id"), str):
        raise ExecFailed("the app server answered without a thread id")
    sandbox = response.get("sandbox")
    if request.sandbox is None and isinstance(sandbox, dict) and sandbox.get("type") == "dangerFullAccess":
        print("trio-agent exec: commands run without a sandbox (Bubblewrap does not work here); pass --sandbox "
              "danger-full-access to say you mean it", file=sys.stderr, flush=True)
    if request.cd_given and thread_id is not None and request.cwd != response.get("cwd"):
        print(f"trio-agent exec: thread {thread_id} keeps its own workspace {response.get('cwd')}; --cd "
              f"{request.cwd} applies to new threads", file=sys.stderr, flush=True)
    return str(thread["id"])


async def _last_thread(client: _Client, request: ExecRequest) -> str:
    params: Json = {"sortKey": "updated_at", "limit": 1}
    if not request.resume_all:
        params["cwd"] = request.cwd
    listed = await client.request("thread/list", params)
    data = listed.get("data") or []
    if not data:
        where = "" if request.resume_all else f" in {params['cwd']} (--all: anywhere)"
        raise ExecFailed(f"resume --last: no thread to resume{where}; start one with `trio-agent exec PROMPT`")
    return str(data[0]["id"])


def turn_params(thread_id: str, request: ExecRequest) -> Json:
    """``turn/start``'s params: the images (``localImage``) then the prompt, and the
    per-turn settings exec was given."""
    items: list[Json] = [{"type": "localImage", "path": path} for path in request.images]
    items.append({"type": "text", "text": request.prompt, "text_elements": []})
    params: Json = {"threadId": thread_id, "input": items, "approvalPolicy": request.approval}
    if request.model is not None:
        params["model"] = request.model
    if request.effort is not None:
        params["effort"] = request.effort
    if request.output_schema is not None:
        params["outputSchema"] = request.output_schema
    policy = sandbox_policy(request)
    if policy is not None:
        params["sandboxPolicy"] = policy
    return params


def sandbox_policy(request: ExecRequest) -> Json | None:
    """The turn's ``SandboxPolicy`` when ``--add-dir`` or ``network_access`` tune the
    sandbox (None: the thread's own). A writable root, or network access asked for
    without a mode, implies workspace-write (as ``trio-agent run --network`` does);
    network access *off* without a mode is what the default sandbox has already."""
    network = bool(request.network_access)
    mode = request.sandbox
    if mode is None and (request.writable_roots or network):
        mode = "workspace-write"
    if mode is None or mode == "danger-full-access" or (not request.writable_roots
                                                         and request.network_access is None):
        return None  # nothing to tune (danger-full-access: everything is writable and reachable already)
    if mode == "read-only":
        return {"type": "readOnly", "networkAccess": network}
    return {"type": "workspaceWrite", "writableRoots": list(request.writable_roots), "networkAccess": network}


@attrs.frozen
class ExecResult:
    """How the run ended: the turn's ``outcome`` (None: it never ran), the exit
    ``status`` and the turn's last agent message (``final_message``)."""

    outcome: TurnOutcome | None
    status: int
    thread_id: str | None = None
    final_message: str | None = None


async def drive_turn(serve: Callable[[MemoryChannel], Awaitable[None]], request: ExecRequest,
                     output: Output) -> ExecResult:
    """Run ``request``'s turn on a connection that ``serve`` serves (the server's end of
    an in-memory pair); returns the turn's outcome (None: it never ran) and the exit
    status: 0 completed, 1 failed or could not start, 128 + signal interrupted."""
    client_end, server_end = memory_channels()
    turn = _Turn(request, output)
    interrupts = Interrupts()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve, server_end)
        with trio.CancelScope() as cancel:
            try:
                async with open_interrupts(interrupts, lambda got: turn.interrupt(got, cancel)):
                    await _run_guarded(turn, client_end)
            finally:
                with trio.CancelScope(shield=True):
                    await client_end.aclose()  # the server's end sees EOF: the connection finishes
    events = turn.events
    outcome = events.outcome if events is not None else None
    status = await _finish(turn, interrupts, outcome)
    final = events.final_message if events is not None and outcome is TurnOutcome.COMPLETED else None
    with contextlib.suppress(OutputClosed):
        await output.finish(final)
    return ExecResult(outcome, status, events.thread_id if events is not None else None, final)


async def _run_guarded(turn: _Turn, channel: MemoryChannel) -> None:
    try:
        await _run(turn, channel)
    except ExecFailed as exc:
        turn.failure = str(exc)
    except OutputClosed as exc:  # nobody reads the turn: it ends with the server (cancelled, rollout flushed)
        turn.failure = f"{exc}; the turn is cancelled"


async def _run(turn: _Turn, channel: MemoryChannel) -> None:
    request = turn.request
    client = turn.client = _Client(channel, turn.on_message)
    await client.request("initialize", {"clientInfo": {"name": request.client_name, "title": "trio-agent exec",
                                                       "version": request.version},
                                        "capabilities": {"experimentalApi": True}})
    await client.notify("initialized")
    thread_id = await _open_thread(client, request)
    events = turn.events = ExecEvents(thread_id)
    await turn.output.write([events.thread_started()])
    started = await client.request("turn/start", turn_params(thread_id, request))
    wire_turn = started.get("turn")
    if not isinstance(wire_turn, dict) or not isinstance(wire_turn.get("id"), str):
        raise ExecFailed("turn/start was answered without a turn id")
    events.turn_id = wire_turn["id"]
    await client.read_until(lambda: events.outcome is not None, "the turn to end")


async def _finish(turn: _Turn, interrupts: Interrupts, outcome: TurnOutcome | None) -> int:
    if turn.failure is not None and outcome is None:
        print(f"trio-agent exec: {turn.failure}", file=sys.stderr, flush=True)
        with contextlib.suppress(OutputClosed):
            await turn.output.write([{"type": "error", "message": turn.failure}])
        return interrupts.exit_code if interrupts.received else 1
    if outcome is TurnOutcome.COMPLETED:
        return 0
    if outcome is TurnOutcome.FAILED:
        return 1
    name = signal.Signals(interrupts.signum).name if interrupts.signum is not None else None
    if outcome is TurnOutcome.INTERRUPTED:
        reason = f"turn interrupted by {name}" if name else "turn interrupted"
        with contextlib.suppress(OutputClosed):  # (the SDK's abort may close the pipe as it signals)
            await turn.output.write([{"type": "turn.failed", "error": {"message": reason}}])
    return interrupts.exit_code if interrupts.received else 1
