"""``turn/start`` (steers a busy thread, as codex's ``start_or_steer_turn``), ``turn/steer``
(only the running turn, named by ``expectedTurnId``) and ``turn/interrupt``.

Each registers what the pump must know -- the new turn's wire id and input, or the
steer's text -- under the thread's lock, in the same step as the agent accepts it.

``turn/start``'s settings follow the schema's doc strings: ``model``, ``effort``,
``sandboxPolicy`` and ``approvalPolicy`` apply to this turn and the later ones (the
thread's record keeps model and permissions for a cold resume); ``outputSchema``
constrains this turn's final message only (``ta.OutputSchema``: the Responses
``text.format`` of its requests; the message is the JSON text). A ``turn/start`` that
steers a busy thread starts no turn: its ``outputSchema`` has no turn to apply to and
the running turn keeps its own, as codex does; its other settings apply from the next
turn on.
"""

from __future__ import annotations

import base64
import errno
import mimetypes
import os
import stat
from typing import TYPE_CHECKING, Any

import trio

from .._config import Thinking, context_window
from .._errors import ConfigError
from .._runtime import Prompt, TurnStatus
from .._tools._sandbox import SandboxUnavailable
from .._tools._security import ApprovalPolicy
from ._connection import Connection, Reply
from ._items import UserInput
from ._jsonrpc import InvalidParams, InvalidRequest
from ._params import Params, shown
from ._permissions import parse_approval, parse_sandbox_policy, requested_sandbox, unavailable
from ._thread_state import registering

if TYPE_CHECKING:
    from .._runtime import Agent
    from .._wire.output_schema import OutputSchema
    from ._context import ServerContext
    from ._thread_state import ThreadState

__all__ = ["METHODS", "parse_input"]

Json = dict[str, Any]
MAX_LOCAL_IMAGE_BYTES = 20 << 20
_EFFORTS = {thinking.value: thinking for thinking in Thinking}


async def parse_input(params: Params) -> UserInput:
    """``input`` (v2 ``UserInput`` items): text parts are joined with newlines, images
    are sent as ``input_image`` (``localImage`` is read and sent as a ``data:`` URL)."""
    texts: list[str] = []
    images: list[str] = []
    content: list[Json] = []
    for index, item in enumerate(params.array("input")):
        where = f"{params.method}: input[{index}]"
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text" and isinstance(item.get("text"), str):
            texts.append(item["text"])
            content.append({"type": "text", "text": item["text"], "text_elements": item.get("text_elements") or []})
        elif kind == "image" and isinstance(item.get("url"), str):
            images.append(item["url"])
            content.append({"type": "image", "url": item["url"]})
        elif kind == "localImage" and isinstance(item.get("path"), str):
            images.append(await _data_url(where, item["path"]))
            content.append({"type": "localImage", "path": item["path"]})
        else:
            raise InvalidParams(f"{where} is not supported: {shown(item)}; this server takes "
                                "{type: text, text}, {type: image, url} and {type: localImage, path}")
    text = "\n".join(texts)
    if not text.strip():
        raise InvalidParams(f"{params.method}: `input` needs at least one non-empty text item")
    return UserInput(text, tuple(images), tuple(content), client_id=params.opt_string("clientUserMessageId"))


async def _data_url(where: str, path: str) -> str:
    try:
        data = await trio.to_thread.run_sync(_read_image, path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidParams(f"{where}: cannot read the image {shown(path)}: {reason}") from None
    if len(data) > MAX_LOCAL_IMAGE_BYTES:
        raise InvalidParams(f"{where}: the image {shown(path)} is larger than {MAX_LOCAL_IMAGE_BYTES >> 20} MiB")
    mime = mimetypes.guess_type(path)[0] or "application/octet-stream"
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _read_image(path: str) -> bytes:
    """At most one byte more than the limit of a regular file: a FIFO, a device such as
    /dev/zero or a directory is refused, never waited on or read without end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read(MAX_LOCAL_IMAGE_BYTES + 1)
    finally:
        os.close(fd)


def parse_output_schema(params: Params) -> OutputSchema | None:
    """``outputSchema`` (null: none) as a ``ta.OutputSchema``, or ``InvalidParams`` saying
    what is wrong with it."""
    given = params.get("outputSchema")
    if given is None:
        return None
    from .._wire.output_schema import OutputSchema

    try:
        return OutputSchema(given)
    except ConfigError as exc:
        raise InvalidParams(f"{params.method}: `outputSchema` is not usable: {exc}") from None


async def _apply_overrides(server: ServerContext, params: Params, state: ThreadState, agent: Agent) -> None:
    """Per-turn settings, each kept for later turns as codex keeps them: ``model``,
    ``effort``, ``sandboxPolicy`` and ``approvalPolicy`` (the thread's record keeps model
    and permissions for a cold resume). Personality and the rest are ignored
    (docs/app-server.md). Every param is checked before anything changes."""
    sandbox, policy = parse_sandbox_policy(params), parse_approval(params)
    model = params.opt_string("model")
    if model is not None and not model.strip():
        raise InvalidParams(f"{params.method}: `model` must be a model name such as 'gpt-5.5', got {model!r}")
    effort = params.opt_string("effort")
    if effort is not None and effort not in _EFFORTS:
        raise InvalidParams(f"{params.method}: `effort` must be one of {', '.join(_EFFORTS)}, got {effort!r}")
    await _apply_permissions(server, params.method, state, agent, sandbox, policy)
    if effort is not None:
        await agent.set_thinking(_EFFORTS[effort])
    if model is not None and model != agent.model:
        await agent.set_model(model)
        state.mapper.window = context_window(model)
    if model is not None and model != state.meta.model:
        state.meta.model = model
        if not state.meta.ephemeral:
            server.store.update(state.meta)


async def _apply_permissions(server: ServerContext, method: str, state: ThreadState, agent: Agent,
                             sandbox: Json | None, policy: ApprovalPolicy | None) -> None:
    meta = state.meta
    wanted_sandbox = sandbox if sandbox is not None else meta.sandbox
    wanted_policy = policy.value if policy is not None else meta.approval_policy
    if (wanted_sandbox, wanted_policy) == (meta.sandbox, meta.approval_policy):
        return
    requested = requested_sandbox(wanted_sandbox) if wanted_sandbox is not None else server.config.sandbox
    try:
        await agent.set_permissions(sandbox=requested, approval=server.approvals(wanted_policy))
    except SandboxUnavailable as exc:
        raise unavailable(method, exc) from None
    meta.sandbox, meta.approval_policy = wanted_sandbox, wanted_policy
    if not meta.ephemeral:
        server.store.update(meta)


async def turn_start(server: ServerContext, conn: Connection, params: Params) -> Reply:
    state, agent = server.loaded_state(params.string("threadId"))
    given = await parse_input(params)
    output_schema = parse_output_schema(params)
    await _apply_overrides(server, params, state, agent)
    async with registering(state):
        submission = await agent.submit(Prompt(given.text, images=given.images), output_schema=output_schema)
        turn = submission.turn
        if submission.kind == "started":
            mapper = state.mapper.accept_turn(turn.turn_id, given)
            state.handles[turn.turn_id] = turn
        else:  # a busy thread: the input steered the running turn
            mapper = state.mapper.accept_turn(turn.turn_id, None)
            mapper.steers.append(given)
        return Reply({"turn": mapper.record.to_json("notLoaded")})


async def turn_steer(server: ServerContext, conn: Connection, params: Params) -> Reply:
    state, agent = server.loaded_state(params.string("threadId"))
    expected = params.string("expectedTurnId")
    given = await parse_input(params)
    if given.images:
        raise InvalidParams("turn/steer: a steer carries text only; send images with turn/start")
    async with state.lock:
        running = agent.statistics().running_turn
        mapper = state.mapper.wire_turn(running)
        handle = state.handles.get(running) if running is not None else None
        if mapper is None or handle is None:
            raise InvalidRequest(f"turn/steer: no turn is running on thread {state.thread_id}; use turn/start")
        if mapper.record.id != expected:
            raise InvalidRequest(f"turn/steer: expected turn {expected} but turn {mapper.record.id} is running")
        await handle.steer(given.text)
        mapper.steers.append(given)
        return Reply({"turnId": mapper.record.id})


async def turn_interrupt(server: ServerContext, conn: Connection, params: Params) -> Reply:
    state, _agent = server.loaded_state(params.string("threadId"))
    turn_id = params.string("turnId")
    found = state.mapper.find_turn(turn_id)
    if found is None:
        raise InvalidRequest(f"turn/interrupt: thread {state.thread_id} has no live turn {turn_id}")
    handle = state.handles.get(found[0])
    if handle is None or handle.status not in (TurnStatus.QUEUED, TurnStatus.RUNNING):
        raise InvalidRequest(f"turn/interrupt: turn {turn_id} is not running; nothing to interrupt")
    await handle.cancel()  # returns once the turn has ended (its terminal event is out)
    return Reply({})


METHODS = {
    "turn/start": turn_start,
    "turn/steer": turn_steer,
    "turn/interrupt": turn_interrupt,
}
