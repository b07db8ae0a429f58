"""``trio-agent exec``'s process: the model (the API, or the local scripted model), an
in-process app server on the home, one turn (``_session.drive_turn``), then a
clean shutdown -- the thread's rollout and record flushed before the process exits, so
the next ``exec resume`` (or ``serve``) finds them.

Nothing but events reaches stdout: ``sys.stdout`` is pointed at stderr for the run, and
the events go to a duplicate of descriptor 1.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import trio

from .._connection import Connection
from ._output import HumanOutput, JsonlOutput, Output
from ._session import ExecRequest, ExecResult, MemoryChannel, drive_turn

__all__ = ["run_exec"]


def _say(message: str) -> None:
    print(f"trio-agent exec: {message}", file=sys.stderr, flush=True)


def run_exec(request: ExecRequest, connection: Connection, *, home: Path, json_mode: bool,
             last_message_file: str | None) -> int:
    """Run the turn; returns the exit status."""
    stdout_fd = os.dup(1)
    saved, sys.stdout = sys.stdout, sys.stderr
    try:
        # Said once in exec's words, from the thread's sandbox (_session), not as a Python warning.
        warnings.filterwarnings("ignore", message="trio_agent: commands run without a sandbox",
                                category=RuntimeWarning)
        result = trio.run(_run, request, connection, home, json_mode, stdout_fd)
    finally:
        sys.stdout = saved
    if last_message_file is not None and result.status == 0:
        _write_last_message(last_message_file, result.final_message)
    return result.status


def _write_last_message(path: str, message: str | None) -> None:
    if message is None:
        _say(f"no final answer to write to {path}")
    try:
        Path(path).write_text(message or "", encoding="utf-8")
    except OSError as exc:
        _say(f"cannot write the final answer to {path}: {exc}")


async def _run(request: ExecRequest, connection: Connection, home: Path, json_mode: bool,
               stdout_fd: int) -> ExecResult:
    import trio_agent as ta

    from ..._serve._server import open_app_server

    async with trio.open_nursery() as nursery:
        responses, provider = dict(connection.responses), "openai"
        if connection.credential_note is not None:
            _say(connection.credential_note)
        if connection.local_reason is not None:
            from ..._local_model import serve_local_model

            reason = connection.local_reason.replace("no OPENAI_API_KEY set", "no CODEX_API_KEY or OPENAI_API_KEY set")
            _say(f"{reason}; using the built-in local scripted model (not a real model)")
            model_server = await nursery.start(serve_local_model)
            responses["websocket_url"], provider = model_server.url, "trio-agent-local"
            responses["profile"] = ta.Profile.OPENAI  # the local model speaks OpenAI's dialect
        config = ta.AgentConfig(auth=connection.key or "local-key", workspace=Path(request.cwd),
                                responses=ta.Responses(**responses))
        async with open_app_server(config, home=home, model_provider=provider, web_search=request.web_search) as app, \
                trio.lowlevel.FdStream(stdout_fd) as stdout:
            output: Output = JsonlOutput(stdout) if json_mode else HumanOutput(stdout)

            async def serve(channel: MemoryChannel) -> None:
                await app.serve_connection(channel, label="trio-agent exec")

            result = await drive_turn(serve, request, output)
        nursery.cancel_scope.cancel()
    return result

