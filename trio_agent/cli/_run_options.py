"""The options of ``trio-agent run`` beyond the prompt and the model connection
(``_connection``) -- instructions, tools, sandbox and approvals --, the variables its
``--help`` lists, and the :class:`RunSettings` they make.

As for the connection, parsing is pure (nothing starts, no Trio) and every bad value
is an argparse error (usage line, message, exit status 2) that names the flag and
says what to do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio_agent as ta

from .._record import Record
from ._connection import add_connection_options, connection_settings, profile_of

if TYPE_CHECKING:
    from .._codex_config import CodexSettings

__all__ = ["ENVIRONMENT", "McpEntry", "RunSettings", "add_run_options", "environment_epilog", "run_settings"]

#: The variables ``trio-agent run`` reads, for ``--help``.
ENVIRONMENT = (
    ("OPENAI_API_KEY", "the API key; without it, the key or ChatGPT sign-in of an existing Codex login "
                       "($CODEX_HOME/auth.json); without either, or with --local, the built-in local scripted "
                       "model answers"),
    ("CODEX_HOME", "where the Codex login is looked for (default: ~/.codex)"),
    ("OPENAI_BASE_URL", "default of --api-base (also read: OPENAI_API_BASE_URL, nanocodex's name); needs a "
                        "credential, as --api-base does (--local ignores it)"),
    ("OPENAI_RESPONSES_WEBSOCKET_URL", "default of --websocket-url (the same)"),
    ("NANOCODEX_RESPONSES_TRANSPORT", "default of --transport with a credential: websocket (or ws), https (or http)"),
    ("TRIO_AGENT_PROFILE", "default of --profile: openai or generic"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "where --otel exports spans and metrics (OTLP/HTTP)"),
    ("TRIO_AGENT_NO_DAEMON", "1: never hand the run to a warm daemon (trio-agent serve --daemon)"),
    ("TRIO_AGENT_DAEMON", "auto: start a warm daemon when none answers (this run stays in-process)"),
    ("TRIO_AGENT_DAEMON_DIR", "the warm daemon's directory (default: $XDG_RUNTIME_DIR/trio-agent, "
                              "else /tmp/trio-agent-$UID)"),
    ("TRIO_AGENT_DAEMON_VERBOSE", "1: say on stderr whether the warm daemon served the run, and if not, why"),
)


def environment_epilog() -> str:
    width = max(len(name) for name, _ in ENVIRONMENT)
    lines = [f"  {name.ljust(width)}  {_wrapped(text, width + 4)}" for name, text in ENVIRONMENT]
    return "environment variables:\n" + "\n".join(lines)


def _wrapped(text: str, indent: int) -> str:
    import textwrap

    return f"\n{' ' * indent}".join(textwrap.wrap(text, max(40, 100 - indent), break_on_hyphens=False))


class McpEntry(Record):
    """One ``--mcp`` (``kind="http"``, ``target`` the URL) or ``--mcp-stdio``
    (``"stdio"``, ``target`` the command) and the ``--mcp-arg`` values after it."""

    __slots__ = ("kind", "name", "target", "args")  # noqa: RUF023  # field order

    def __init__(self, kind: str, name: str, target: str, args: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.name = name
        self.target = target
        self.args = args


class _McpAction(argparse.Action):
    """``--mcp``, ``--mcp-stdio`` and ``--mcp-arg``, recorded in order into one list."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
        values: str | Sequence[Any] | None, option_string: str | None = None,
    ) -> None:
        entries: list[McpEntry] = list(getattr(namespace, self.dest) or [])
        value = str(values)
        if option_string == "--mcp-arg":
            stdio = [i for i, entry in enumerate(entries) if entry.kind == "stdio"]
            if not stdio:
                parser.error(f"--mcp-arg {value!r} adds an argument to the command of an earlier --mcp-stdio; "
                             "give --mcp-stdio NAME=COMMAND before it")
            last = entries[stdio[-1]]
            entries[stdio[-1]] = McpEntry(last.kind, last.name, last.target, (*last.args, value))
        else:
            name, sep, target = value.partition("=")
            what = "URL" if option_string == "--mcp" else "COMMAND"
            if not sep or not name.strip() or not target.strip():
                parser.error(f"{option_string} takes NAME={what} (for example "
                             f"{'docs=https://example.com/mcp' if what == 'URL' else 'git=uvx mcp-server-git'}), "
                             f"got {value!r}")
            if option_string == "--mcp-stdio":
                import shlex  # only for --mcp-stdio (not on a plain run's path)

                try:
                    argv = shlex.split(target)
                except ValueError as exc:
                    parser.error(f"--mcp-stdio {value!r}: the command cannot be split like a shell line ({exc})")
                entries.append(McpEntry("stdio", name, argv[0], tuple(argv[1:])))
            else:
                entries.append(McpEntry("http", name, target.strip()))
        setattr(namespace, self.dest, entries)


def _directory(text: str) -> Path:
    path = Path(text).expanduser().resolve()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not an existing directory")
    return path


def add_run_options(run: argparse.ArgumentParser) -> None:
    """The connection, tool, sandbox and approval options of ``trio-agent run``."""
    # One declaration per option, grouped as --help shows them: long, but flat.
    add_connection_options(run)
    run.add_argument("--instructions", default=None, metavar="TEXT|@FILE",
                     help="replace the default instructions with TEXT, or with the contents of FILE")
    tools = run.add_argument_group("tools")
    tools.add_argument("--mcp", action=_McpAction, dest="mcp", default=None, metavar="NAME=URL",
                       help="add a Streamable HTTP MCP server (repeatable); its tools are mcp__NAME__TOOL")
    tools.add_argument("--mcp-stdio", action=_McpAction, dest="mcp", default=None, metavar="NAME=COMMAND",
                       help="add an MCP server run as COMMAND (split like a shell line; repeatable)")
    tools.add_argument("--mcp-arg", action=_McpAction, dest="mcp", default=None, metavar="ARG",
                       help="append ARG to the command of the last --mcp-stdio (repeatable; "
                            "write --mcp-arg=-x for an ARG that starts with -)")
    tools.add_argument("--no-web-search", action="store_true", help="turn off the web__run web search tool")
    tools.add_argument("--image-generation", action="store_true",
                       help="add the image_gen__imagegen tool (gpt-image-2)")
    sandbox = run.add_argument_group("sandbox and approvals")
    sandbox.add_argument("-s", "--sandbox", choices=[mode.value for mode in ta.SandboxMode], default=None,
                         metavar="MODE",
                         help="how commands are confined, codex's modes: read-only (write nothing), "
                              "workspace-write (the workspace, not .git, no network), danger-full-access "
                              "(no sandbox) (default: workspace-write where Bubblewrap works, else unconfined, "
                              "with a warning); a mode given here that cannot work exits 2")
    sandbox.add_argument("--network", action="store_true",
                         help="let sandboxed commands use the network (implies --sandbox workspace-write)")
    sandbox.add_argument("--writable-git", action="store_true",
                         help="let workspace-write commands write .git (implies --sandbox workspace-write)")
    sandbox.add_argument("--writable-root", "--add-dir", dest="writable_root", action="append", type=_directory,
                         default=None, metavar="DIR",
                         help="one more directory workspace-write commands may write (repeatable)")
    sandbox.add_argument("-a", "--ask-for-approval", choices=[policy.value for policy in ta.ApprovalPolicy],
                         default=None, metavar="POLICY",
                         help="when to ask you on the terminal before a command or patch: never (default), "
                              "on-request, on-failure or untrusted; answer y, N, a (always) or abort")


class RunSettings(Record):
    """What ``trio-agent run`` runs with, checked: the API ``key`` (or an existing Codex
    login's credential), ``local_reason`` (why the local scripted model answers; None:
    the real API), ``credential_note`` (where the credential came from, when not
    ``OPENAI_API_KEY``), ``responses`` (``ta.Responses`` keyword arguments), the
    ``instructions``, ``tools``, ``sandbox`` and ``approval`` policy, and ``notes``
    (lines for stderr about ``-c`` overrides that do nothing here)."""

    __slots__ = (  # noqa: RUF023  # field order
        "key", "local_reason", "credential_note", "responses", "instructions", "tools", "sandbox", "approval",
        "notes",
    )

    def __init__(
        self, *, key: str | ta.ChatGptAuth, local_reason: str | None, credential_note: str | None,
        responses: dict[str, Any], instructions: str | None, tools: ta.Tools, sandbox: ta.Sandbox | None,
        approval: ta.ApprovalPolicy, notes: tuple[str, ...] = (),
    ) -> None:
        self.key = key
        self.local_reason = local_reason
        self.credential_note = credential_note
        self.responses = responses
        self.instructions = instructions
        self.tools = tools
        self.sandbox = sandbox
        self.approval = approval
        self.notes = notes


def run_settings(parser: argparse.ArgumentParser, args: argparse.Namespace,
                 environ: Mapping[str, str]) -> RunSettings:
    """Check ``args`` (and the environment), with codex's ``-c`` overrides applied to
    ``args`` (``_codex``) and ``args.thinking`` resolved; ``parser.error`` (exit 2)
    on a bad value."""
    from ._codex import apply_overrides, codex_overrides

    codex = codex_overrides(parser, args, "run_config")
    notes: tuple[str, ...] = ()
    if codex is not None:
        environ, notes = apply_overrides(parser, args, codex, environ)
    connection = connection_settings(parser, args, environ)
    if args.thinking is None and profile_of(connection.responses) is ta.Profile.OPENAI:
        args.thinking = "low"  # elsewhere none: a server need not take a reasoning field
    try:
        return RunSettings(
            key=connection.key, local_reason=connection.local_reason, credential_note=connection.credential_note,
            responses=connection.responses, notes=notes,
            instructions=_instructions(parser, args.instructions, codex), tools=_tools(parser, args),
            sandbox=_sandbox(parser, args), approval=_approval(parser, args),
        )
    except ta.ConfigError as exc:
        parser.error(str(exc))


def _instructions(parser: argparse.ArgumentParser, value: str | None, codex: CodexSettings | None) -> str | None:
    """``--instructions``, else ``-c instructions``; ``-c developer_instructions`` appended."""
    text = _instructions_flag(parser, value)
    if codex is None:
        return text
    text = text or codex.instructions
    if codex.developer_instructions is None:
        return text
    from .._session.context import DEFAULT_INSTRUCTIONS

    return f"{text or DEFAULT_INSTRUCTIONS}\n\n{codex.developer_instructions}"


def _instructions_flag(parser: argparse.ArgumentParser, value: str | None) -> str | None:
    if value is None:
        return None
    text = value
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            parser.error(f"--instructions {value}: cannot read {str(path)!r} ({exc.__class__.__name__}: {exc}); "
                         "pass @FILE with a readable UTF-8 file, or the text itself")
    if not text.strip():
        parser.error(f"--instructions {value!r} is empty; give the instructions, or omit it for the default")
    return text


def _logged_in(entry: McpEntry) -> bool:
    """Whether ``trio-agent mcp login`` stored tokens for this server (codex uses a stored
    login the same way); a name that is not a server name is refused by ``with_mcp``."""
    from .._tools._mcp_oauth import agent_home, token_path

    return "/" not in entry.name and token_path(agent_home(), entry.name, entry.target).exists()


def _tools(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ta.Tools:
    tools = ta.Tools.default()
    entries: list[McpEntry] = args.mcp or []
    if entries and _mcp_missing():
        parser.error("--mcp and --mcp-stdio need the MCP SDK: pip install 'trio-agent[mcp]'")
    for entry in entries:
        server = (ta.McpServer.http(entry.target, oauth=_logged_in(entry)) if entry.kind == "http"
                  else ta.McpServer.stdio(entry.target, list(entry.args)))
        tools.with_mcp(entry.name, server)  # ConfigError: a bad or duplicate name
    if args.no_web_search:
        tools.without_web_search()
    if args.image_generation:
        tools.with_image_generation()
    return tools


def _sandbox(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ta.Sandbox | None:
    roots: list[Path] = args.writable_root or []
    tuning = [flag for flag, on in (("--network", args.network), ("--writable-git", args.writable_git),
                                    ("--writable-root", roots)) if on]
    mode = ta.SandboxMode(args.sandbox) if args.sandbox else None
    if not tuning:
        return None if mode is None else ta.Sandbox(mode)
    where = getattr(args, "sandbox_source", None) or "--sandbox"
    if mode is ta.SandboxMode.DANGER_FULL_ACCESS:
        parser.error(f"{tuning[0]} sets up the sandbox, and {where} danger-full-access has none; "
                     "drop one of them")
    if mode is ta.SandboxMode.READ_ONLY and (args.writable_git or roots):
        flag = "--writable-git" if args.writable_git else "--writable-root"
        parser.error(f"{flag} makes something writable, and {where} read-only writes nothing; "
                     "use --sandbox workspace-write")
    return ta.Sandbox(mode or ta.SandboxMode.WORKSPACE_WRITE, network=args.network, writable_git=args.writable_git,
                      writable_roots=roots)


def _approval(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ta.ApprovalPolicy:
    policy = ta.ApprovalPolicy(args.ask_for_approval or "never")
    if policy is not ta.ApprovalPolicy.NEVER and not sys.stdin.isatty():
        where = getattr(args, "approval_source", None) or f"--ask-for-approval {policy.value}"
        parser.error(f"{where} asks you on the terminal, and stdin is not a terminal; "
                     "run trio-agent in a terminal, or pass --ask-for-approval never")
    return policy


def _mcp_missing() -> bool:
    """Whether the MCP SDK is not installed (only asked when MCP servers are given)."""
    import importlib.util

    return importlib.util.find_spec("mcp") is None
