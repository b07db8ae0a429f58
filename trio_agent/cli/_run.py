"""``trio-agent run PROMPT``: one prompt against the real API or the built-in local
scripted model, printed as it happens (``_output``), Ctrl-C handled
(``_signals``).

Standard output carries only the result: the final answer (human mode) or the events
(``--jsonl``); notices (the local model, a credential note), progress and the
``-- completed``/``-- cancelled`` lines go to standard error (``_output``).

Exit status: 0 when the turn completed, 1 when it failed, 2 for a configuration the
agent refuses (a bad workspace, a sandbox mode that cannot work here), 130 after
Ctrl-C (143 after SIGTERM). On the first signal the live turn is cancelled through
its handle -- its tools are killed, its terminal event is printed, the agent closes
as usual (rollout and cassette flushed, OpenTelemetry spans ended) -- and the command
prints one ``-- cancelled ...`` line, still inside the signal handling, then settles
it (``Interrupts.settle``: later signals are ignored, so that line stays the only
one); a signal before the turn was accepted cancels the start-up instead.

The warm daemon's workers (``_daemon._worker``) run this same command with a
:class:`Hold`: once the agent is open, ``run_command`` waits in it -- for the warmup,
then for a client, whose terminal becomes the process's stdout and stderr -- and
sends the prompt the client brought. Everything printed before the hold returned is
shown to that client first, so its output is the in-process output.

Cold start: with its prompt in hand, the command opens the agent with
``warmup=False`` -- the socket opens at startup, no ``generate: false`` warmup is sent,
and the prompt goes out as soon as the socket is open, one round trip sooner than
chained on a warmup. A daemon's worker, whose prompt comes later, warms up as any agent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import trio

import trio_agent as ta

from ._output import HumanPrinter, JsonlPrinter
from ._run_options import RunSettings
from ._sessions import announce_session, session_config
from ._signals import Interrupts, open_interrupts

if TYPE_CHECKING:
    from .._tools._security import ApprovalHook
    from .._tracing._settings import Tracing
    from ._approval_prompt import TerminalApprover

__all__ = ["Hold", "run_command"]

Printer = HumanPrinter | JsonlPrinter


class Hold(Protocol):
    """Called once the agent is open; returns the prompt to send (``_daemon._worker``).
    ``warms``: the agent sends a ``generate: false`` warmup (OpenAI's dialect over a
    WebSocket); otherwise there is no warmup to wait for."""

    async def __call__(self, agent: ta.Agent, warms: bool) -> str: ...


class _State:
    """The command's own state (a plain class, not an attrs one: building an attrs class
    costs its module's import ~0.4 ms, on the path to a cold run's answer)."""

    __slots__ = ("starting", "turns", "hold")  # noqa: RUF023  # field order

    def __init__(self, starting: float, hold: Hold | None = None) -> None:
        self.starting = starting  # Trio's clock when the command started (for the cancelled line)
        self.turns: list[ta.Turn] = []
        self.hold = hold


async def run_command(
    args: argparse.Namespace, settings: RunSettings, interrupts: Interrupts, tracing: Tracing | None = None,
    *, hold: Hold | None = None,
) -> int:
    """The whole ``run`` command inside ``trio.run``; returns the exit status."""
    state = _State(trio.current_time(), hold=hold)
    turns = state.turns
    printer: Printer = JsonlPrinter(interrupts) if args.jsonl else HumanPrinter(interrupts)
    work = trio.CancelScope()

    async def on_interrupt(_: Interrupts) -> None:
        if turns:
            try:
                await turns[0].cancel()  # returns once its terminal event is out
                return
            except ta.TurnNotCancellable:  # it had already ended: the agent is closing
                pass
        work.cancel()

    code = 1
    async with open_interrupts(interrupts, on_interrupt):
        with work:
            code = await _run(args, settings, printer, tracing, state)
        if interrupts.received:
            print(printer.cancelled_line(state.starting), file=sys.stderr, flush=True)
            interrupts.settle()
            return interrupts.exit_code
    return code


def _say(message: str) -> None:
    print(f"trio-agent: {message}", file=sys.stderr, flush=True)


async def _run(args: argparse.Namespace, settings: RunSettings, printer: Printer, tracing: Tracing | None,
               state: _State) -> int:
    async with trio.open_nursery() as nursery:
        responses = dict(settings.responses)
        if settings.credential_note is not None:
            _say(settings.credential_note)
        if settings.local_reason is not None:
            from .._local_model import serve_local_model

            _say(f"{settings.local_reason}; using the built-in local scripted model (not a real model)")
            server = await nursery.start(serve_local_model)
            responses["websocket_url"] = server.url
            responses["profile"] = ta.Profile.OPENAI  # the local model speaks OpenAI's dialect
        approval = ta.Approvals()
        if settings.approval is not ta.ApprovalPolicy.NEVER:
            from ._approval_prompt import TerminalApprover

            approval = ta.Approvals(settings.approval, hook=_asking(TerminalApprover(nursery), printer))
        try:
            config = session_config(ta.AgentConfig(
                auth=settings.key or "local-key",
                thinking=ta.Thinking(args.thinking) if args.thinking else None,
                workspace=args.workspace or Path.cwd(),
                responses=ta.Responses(**responses),
                instructions=settings.instructions,
                tools=settings.tools,
                sandbox=settings.sandbox,
                approval=approval,
                tracing=tracing,
                record=args.record,
                **({"model": args.model} if args.model else {}),
            ), args)
        except ta.ConfigError as exc:
            print(f"trio-agent: {exc}", file=sys.stderr)
            nursery.cancel_scope.cancel()
            return 2
        code = await _prompt(config, args, printer, state)
        nursery.cancel_scope.cancel()
    return code


def _asking(approver: TerminalApprover, printer: Printer) -> ApprovalHook:
    """The approver's question, with the human printer's progress held back meanwhile
    (both write to stderr); the printer first shows what it already has."""

    async def ask(request: ta.ApprovalRequest) -> ta.ApprovalDecision:
        await trio.lowlevel.checkpoint()  # the printer's task prints the events emitted so far
        if isinstance(printer, HumanPrinter):
            with printer.held():
                return await approver.ask(request)
        return await approver.ask(request)

    return ask


async def _prompt(config: ta.AgentConfig, args: argparse.Namespace, printer: Printer, state: _State) -> int:
    async with trio.open_nursery() as nursery:
        try:
            # The prompt in hand (no daemon's hold): no warmup request, so that the
            # prompt leaves the moment the socket is open (ModelClient.warmup).
            async with ta.open_agent(config, warmup=state.hold is not None) as agent:
                nursery.start_soon(printer.consume, agent.events)
                prompt: str = args.prompt
                if state.hold is not None:
                    prompt = await state.hold(agent, _sends_warmup(config))
                    state.starting = trio.current_time()
                    printer.attached()
                turn = await agent.prompt(prompt)
                state.turns.append(turn)
                code = await _outcome(turn, printer)
        except ta.SandboxUnavailable as exc:
            print(f"trio-agent: {exc} (here: --sandbox danger-full-access)", file=sys.stderr)
            return 2
        except ta.RolloutError as exc:  # the session's file: locked by a live run, or the home not writable
            print(f"trio-agent: {exc}" + ("" if args.command == "resume" else " (or run with --ephemeral)"),
                  file=sys.stderr)
            return 2
    announce_session(config)
    return code


async def _outcome(turn: ta.Turn, printer: Printer) -> int:
    try:
        result = await turn.result()
    except ta.AgentError as exc:
        if not printer.interrupts.received:
            print(f"\ntrio-agent: the turn failed: {exc}", file=sys.stderr)
        return 1
    await printer.answer(result.final_message)
    return 0


def _sends_warmup(config: ta.AgentConfig) -> bool:
    """Whether an agent opened with ``warmup=True`` sends a warmup request: only in
    OpenAI's dialect (the generic profile has none) and over a WebSocket (HTTPS has none).
    The same rule as ``ModelClient.warmup`` (``portable``: no warmup request) and the
    HTTPS transport's lack of one; should they part, a worker waits at most its
    ``WARMUP_BOUND`` for a warmup that does not come."""
    return config.profile is ta.Profile.OPENAI and config.responses.transport is ta.Transport.WEBSOCKET
