"""The ``trio-agent`` command line.

``trio-agent run PROMPT`` talks to the real API when ``OPENAI_API_KEY`` is set, and to
the built-in local scripted model otherwise (or with ``--local``), saying so on its
first line. Human output streams the assistant's text, each tool call and a running
command's output, and ends with one summary line; ``--jsonl`` prints every event as
one JSON object per line instead (``_output``). Its options -- the model
connection, tools, sandbox and approvals, with their environment defaults -- are in
``_run_options`` and ``_connection``; the command itself is ``_run``.

Signals: each command catches SIGINT/SIGTERM with ``trio.open_signal_receiver`` for
its whole run (``_signals``): the first signal cancels the work cleanly (``run``:
the live turn; exit 130 after one ``-- cancelled ...`` line), a second one exits at
once. ``main`` turns a ``KeyboardInterrupt`` that arrives outside that window --
bare, or in Trio's exception groups -- into exit status 130 without a traceback.

``trio-agent exec`` runs one turn with codex exec's command line and prints its JSONL
events (``_exec._command``): what ``@openai/codex-sdk`` drives, one process per turn,
``resume THREAD_ID`` continuing a thread of the app server's home.

``trio-agent serve`` serves durable threads over the Codex app-server v2 protocol
(``docs/app-server.md``): one client on stdio by default, any number with
``--listen ws://127.0.0.1:PORT``. The model is configured as for ``run``; everything
it prints goes to stderr (stdout is the protocol on stdio). SIGINT or SIGTERM shuts it
down cleanly: threads cancelled with their terminal notifications, rollouts flushed;
a second one exits at once. ``trio-agent serve --daemon`` starts the warm daemon
instead, which serves ``trio-agent run`` from prewarmed agents (``_daemon``; the thin
client is ``_trio_agent_launch``, the console script's target); ``--stop`` stops it.

Start-up stays lean: the heavy modules (the local model's test kit, the app server,
OpenTelemetry, the MCP SDK, the benchmark) are imported only by the command that
needs them.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, cast

import trio

from .. import __version__
from ._codex import add_config_option
from ._connection import connection_settings
from ._parser import Parser, SubcommandParser, refuse
from ._replay import add_record_option, add_replay_command, run_replay  # record/replay (issue 15)
from ._run_options import add_run_options, environment_epilog, run_settings
from ._sessions import add_session_options
from ._signals import Interrupts, exit_on_signal, interrupted_only

if TYPE_CHECKING:
    from .._tracing._settings import Tracing

__all__ = ["main"]

#: The commands that take codex's top-level ``-c key=value`` options (``args.codex_config``).
_CODEX_COMMANDS = ("run", "resume", "app-server", "exec")


def _parsers(run_only: bool = False) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser,
                                              argparse.ArgumentParser | None]:
    """The command line's parser, and its ``run`` and ``serve`` subparsers (for the checks of ``_run_options``).
    No parser takes abbreviations, and each subcommand reports its own errors (``_parser``).

    ``run_only``: a command line whose command is ``run`` (``_main``) gets the parser
    with that subcommand alone (no ``serve`` one), which parses it exactly as the whole
    one would -- everything after ``run`` is the run parser's, its usage, help and errors
    are its own -- in a fifth of the time (3.7 -> 0.8 ms, p50 of 30 builds: the other
    seven subcommands' parsers, ``resume``'s with a copy of run's options, are most of it)."""
    parser = Parser(prog="trio-agent", description="A Trio-native coding agent runtime.",
                    epilog=environment_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"trio-agent {__version__}")
    parser.add_argument("-c", "--config", dest="codex_config", action="append", default=[], metavar="key=value",
                        help=f"a codex config override, as codex takes it (for {', '.join(_CODEX_COMMANDS)}; "
                             "repeatable)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=SubcommandParser)
    run = sub.add_parser("run", help="run one prompt and print the answer", epilog=environment_epilog(),
                         usage="%(prog)s [options] [PROMPT | -]",
                         description="Run one prompt and print the answer, the tool calls and their output as "
                                     "they happen. Ctrl-C cancels the turn (exit 130); a second Ctrl-C exits at once. "
                                     "codex's -m, -s, -C/--cd, -c key=value, -a and --json work as in codex.",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("prompt", nargs="?", default=None,
                     help="what to ask the agent; - (or nothing, with stdin not a terminal): read it from stdin")
    run.add_argument("--local", action="store_true", help="use the built-in local scripted model")
    run.add_argument("--jsonl", "--json", dest="jsonl", action="store_true", help="print every event as a JSON line")
    run.add_argument(
        "--thinking", choices=["none", "minimal", "low", "medium", "high", "xhigh"], default=None,
        help="reasoning effort; none: no reasoning (default: low on OpenAI's servers, none on others)",
    )
    run.add_argument("-C", "--cd", "--workspace", dest="workspace", type=Path, default=None, metavar="DIR",
                     help="where tools run (default: .)")
    run.add_argument("-m", "--model", default=None, help="model slug (default: gpt-5.5)")
    add_config_option(run, "run_config")
    run.add_argument(
        "--otel", action="store_true",
        help="export OpenTelemetry spans and metrics over OTLP/HTTP (set OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    add_record_option(run)
    add_run_options(run)
    add_session_options(run)  # sessions (issue 24): --ephemeral; `resume` takes run's options
    if run_only:
        return parser, run, None
    # the other commands' modules: imported for their parsers, never on run's path
    from ._app_server import add_app_server_command, add_server_options
    from ._mcp_login import add_mcp_command
    from ._resume import add_resume_command

    add_resume_command(sub, run)
    serve = sub.add_parser("serve", help="serve threads over the Codex app-server protocol (JSON-RPC)")
    serve.add_argument("--listen", default=None, metavar="ws://HOST:PORT",
                       help="serve any number of clients over WebSocket (default: one client on stdio)")
    serve.add_argument("-m", "--model", default=None, help="default model slug of new threads (default: gpt-5.5)")
    serve.add_argument("-C", "--cd", "--workspace", dest="workspace", type=Path, default=None, metavar="DIR",
                       help="default cwd of new threads (default: .)")
    add_server_options(serve)
    lifecycle = serve.add_mutually_exclusive_group()
    lifecycle.add_argument("--daemon", action="store_true",
                           help="start the warm daemon in the background instead: `trio-agent run` then runs on "
                                "prewarmed agents (socket in $XDG_RUNTIME_DIR/trio-agent, else /tmp/trio-agent-$UID)")
    lifecycle.add_argument("--stop", action="store_true", help="stop the warm daemon (its runs are cancelled)")
    sub.add_parser("exec", add_help=False,
                   help="run one turn and print codex exec's JSONL (--json): what @openai/codex-sdk runs "
                        "(trio-agent exec --help for options)")
    sub.add_parser(
        "bench", add_help=False,
        help="first-token latency per warmup path against a local scripted server (--help for options)",
    )
    add_replay_command(cast("argparse._SubParsersAction[argparse.ArgumentParser]", sub))
    add_app_server_command(sub)  # codex's entry point (_app_server)
    add_mcp_command(cast("argparse._SubParsersAction[argparse.ArgumentParser]", sub))  # OAuth logins (_mcp_login)
    return parser, run, serve


def _leading_config(argv: list[str]) -> tuple[list[str], list[str]]:
    """``-c/--config KEY=VALUE`` options before the command (codex's global ``-c``), as
    ``--config=KEY=VALUE`` each, and the rest of ``argv``."""
    overrides: list[str] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg in ("-c", "--config") and index + 1 < len(argv):
            overrides.append(f"--config={argv[index + 1]}")
            index += 2
        elif arg.startswith("--config="):
            overrides.append(arg)
            index += 1
        else:
            break
    return overrides, argv[index:]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        return _main(argv)
    except BaseException as exc:  # only a Ctrl-C that arrived outside a command's own handling
        if not interrupted_only(exc):
            raise
        print("-- cancelled by Ctrl-C", file=sys.stderr, flush=True)
        return 130


def _main(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:
        from ._bench._command import main as bench

        return bench(argv[1:])
    overrides, rest = _leading_config(argv)
    if rest[:1] == ["exec"]:  # codex exec's own command line (_exec._command); `-c k=v exec ...` as codex takes it
        from ._exec._command import exec_main

        return exec_main([*overrides, *rest[1:]])
    parser, run_parser, serve_parser = _parsers(run_only=rest[:1] == ["run"])
    args = parser.parse_args(argv)
    if args.codex_config and args.command not in _CODEX_COMMANDS:
        parser.error(f"-c/--config (codex's config overrides) applies to {' and '.join(_CODEX_COMMANDS)}, "
                     f"not to {args.command}")
    if args.command == "app-server":
        from ._app_server import app_server_main

        return app_server_main(args, os.environ)
    if args.command == "replay":
        return run_replay(args)
    if args.command == "mcp":
        from ._mcp_login import mcp_main

        return mcp_main(args)
    if args.command == "serve" and (args.daemon or args.stop):
        from ._serve_options import listener_options_given

        given = [flag for flag, value in (("--listen", args.listen), ("--home", args.home), ("--local", args.local),
                                          *listener_options_given(args),
                                          ("--model", args.model), ("--workspace", args.workspace),
                                          ("--api-base", args.api_base), ("--websocket-url", args.websocket_url),
                                          ("--transport", args.transport), ("--max-attempts", args.max_attempts))
                 if value]
        if given:
            parser.error(f"{given[0]} configures the app server; the warm daemon takes each run's own options "
                         f"(drop {given[0]})")
        from .._daemon._command import start_daemon, stop_daemon

        return start_daemon() if args.daemon else stop_daemon()
    if args.command == "serve":
        from .._serve._command import serve_main

        assert serve_parser is not None  # built unless the command is run
        return serve_main(args, connection_settings(serve_parser, args, os.environ))
    run_parser = getattr(args, "command_parser", run_parser)  # resume's own parser (_resume)
    settings = run_settings(run_parser, args, os.environ)
    if args.command == "resume":
        from ._resume import prepare_resume

        prepare_resume(run_parser, args, os.environ)
    from ._prompt import PromptError, read_prompt

    try:
        args.prompt = read_prompt(args.prompt, sys.stdin)
    except PromptError as exc:
        refuse(run_parser.prog, str(exc))
    for note in settings.notes:
        print(note, file=sys.stderr, flush=True)
    # The CLI says it in one line, from the sandbox.unavailable event (_output).
    warnings.filterwarnings("ignore", message="trio_agent: commands run without a sandbox", category=RuntimeWarning)
    from ._run import run_command

    interrupts = Interrupts()

    def run(tracing: Tracing | None = None) -> int:
        code = trio.run(run_command, args, settings, interrupts, tracing)
        exit_on_signal()  # e.g. while --otel flushes its exporters: a signal now exits at once
        return code

    if args.otel:  # tracing: trio_agent/_tracing/_otlp.py
        from .._tracing._otlp import run_with_otlp

        return run_with_otlp(run)
    return run()
