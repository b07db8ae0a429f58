"""``trio-agent app-server``: codex's own entry point for the app server.

Codex's front ends start their server as ``codex [-c key=value]... app-server --listen
stdio://`` (the official Python SDK: ``[bin, --config kv..., app-server, --listen,
stdio://]``) and, to learn which fields an unversioned server accepts,
``codex [-c ...] app-server generate-json-schema --experimental --out DIR``. This
command takes that argv and runs the same server as ``trio-agent serve``
(``_serve._command.serve_main``), configured from the overrides
(``_codex_config.parse_overrides``: the top-level ``-c`` options, then those after
``app-server``, later ones winning, as codex's global ``-c``).

What the overrides do here (docs/app-server.md "Entry points"): ``model`` and
``model_reasoning_effort`` are every new thread's defaults; ``sandbox_mode`` (with
``sandbox_workspace_write.network_access`` / ``.writable_roots``, which codex applies to
``workspace-write`` only) and ``approval_policy`` are the server's defaults, which a
thread's own ``sandbox``/``approvalPolicy`` still override; ``openai_base_url``, or
``model_provider`` with ``model_providers.<id>.base_url`` and ``.env_key``, choose the
Responses endpoint and the variable holding its key; ``web_search`` other than
``"live"`` leaves ``web__run`` out of the threads' tools (``--no-web-search``).
``instructions`` and ``developer_instructions`` are not applied by the app server (a
thread gets instructions from ``thread/start``), so they are reported with the unknown
keys, once, on stderr. A bad value, an
unset ``env_key`` variable or a transport trio-agent lacks exits 2 with one line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._connection import add_connection_options
from ._serve_options import add_listener_options

if TYPE_CHECKING:
    from .._base.approval_request import ApprovalRequest
    from .._codex_config import CodexSettings
    from .._tools._security import ApprovalDecision

__all__ = ["add_app_server_command", "add_server_options", "app_server_main"]

#: CodexSettings fields this command does not apply, with their codex key.
_NOT_APPLIED = (("instructions", "instructions"), ("developer_instructions", "developer_instructions"))


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """The options ``serve`` and ``app-server`` share: the home, the model, the listener."""
    parser.add_argument("--home", type=Path, default=None,
                        help="where rollouts and thread records live (default: $TRIO_AGENT_HOME or ~/.trio-agent)")
    parser.add_argument("--local", action="store_true", help="use the built-in local scripted model")
    parser.add_argument("--unload-delay", type=float, default=60.0, metavar="S",
                        help="seconds an idle thread with no subscriber stays loaded (default: 60)")
    parser.add_argument("--no-web-search", action="store_true",
                        help="leave the web__run tool out of every thread (codex: -c web_search=\"disabled\")")
    parser.add_argument("--multi-agent", action="store_true",
                        help="give every thread the collaboration tools; their workers are child threads "
                             "(codex's multi-agent v2)")
    add_listener_options(parser)
    add_connection_options(parser)


def add_app_server_command(sub: Any) -> argparse.ArgumentParser:
    """The ``app-server`` subcommand (and its ``generate-json-schema``) on ``sub``."""
    app: argparse.ArgumentParser = sub.add_parser(
        "app-server", help="codex's app-server entry point (argv as `codex [-c k=v]... app-server --listen URL`)",
        description="Serve threads over the Codex app-server protocol, started as codex's front ends start "
                    "`codex app-server`; `-c key=value` options (before or after `app-server`) configure it "
                    "(docs/app-server.md, Entry points).")
    app.add_argument("-c", "--config", dest="app_server_config", action="append", default=[], metavar="key=value",
                     help="a codex config override (TOML value, else the raw string); repeatable")
    app.add_argument("--listen", default="stdio://", metavar="URL",
                     help="stdio:// (default: one client on stdin/stdout) or ws://HOST:PORT")
    app.add_argument("--stdio", action="store_true", help="the same as --listen stdio://")
    app.add_argument("--analytics-default-enabled", action="store_true",
                     help="accepted for codex's IDE front ends; trio-agent collects no analytics")
    add_server_options(app)
    app.set_defaults(app_server_parser=app)  # for app_server_main's parser errors
    tools = app.add_subparsers(dest="app_server_command", metavar="{generate-json-schema}")
    schema = tools.add_parser("generate-json-schema", help="write the JSON Schema of what this server accepts",
                              description="Write the JSON Schema of the app-server protocol this server "
                                          "implements, in codex's layout (DIR/v2/<Type>.json and the bundle).")
    schema.add_argument("-c", "--config", dest="schema_config", action="append", default=[], metavar="key=value",
                        help="accepted as codex does (the schema does not depend on it)")
    schema.add_argument("-o", "--out", type=Path, required=True, metavar="DIR", help="the output directory")
    schema.add_argument("--experimental", action="store_true",
                        help="include the experimental fields this server implements (as codex's --experimental)")
    return app


def _say(message: str) -> None:
    print(f"trio-agent app-server: {message}", file=sys.stderr, flush=True)


def app_server_main(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Run ``trio-agent [-c ...] app-server ...`` (``args`` as the command line parsed them)."""
    from .._codex_config import CodexConfigError, parse_overrides

    overrides = [*args.codex_config, *args.app_server_config, *getattr(args, "schema_config", [])]
    try:
        settings = parse_overrides(overrides)
    except CodexConfigError as exc:
        _say(str(exc))
        return 2
    if args.app_server_command == "generate-json-schema":
        from .._serve._schema_export import write_schema

        return write_schema(args.out, experimental=args.experimental)
    ignored = sorted({*settings.ignored, *(key for field, key in _NOT_APPLIED if getattr(settings, field) is not None)})
    if ignored:
        print(f"trio-agent: ignoring codex config keys it does not implement: {', '.join(ignored)}",
              file=sys.stderr, flush=True)
    try:
        template = _template(settings, Path.cwd())
        environ = _provider_environ(settings, environ)
        listen = _listen(args)
    except ValueError as exc:
        _say(str(exc))
        return 2
    return _serve(args.app_server_parser, args, settings, template, environ, listen)


def _serve(app: argparse.ArgumentParser, args: argparse.Namespace, settings: CodexSettings,
           template: dict[str, Any], environ: Mapping[str, str], listen: str | None) -> int:
    from .._serve._command import serve_main
    from ._connection import connection_settings

    connection = connection_settings(app, args, environ)
    if settings.base_url is not None and args.api_base is None:
        if connection.local_reason is not None:
            _say(f"-c sets the Responses API base URL {settings.base_url}, which needs a credential, but "
                 f"{connection.local_reason}: set OPENAI_API_KEY (any value for a server that ignores it), or the "
                 "provider's env_key variable")
            return 2
        connection.responses["api_base_url"] = settings.base_url.rstrip("/")
    serve_args = argparse.Namespace(**vars(args))
    serve_args.listen, serve_args.model, serve_args.workspace = listen, settings.model, None
    if settings.web_search is not None:  # -c web_search: only "live" is web__run here (no cached index)
        serve_args.no_web_search = not settings.web_search_enabled
    return serve_main(serve_args, connection, template=template)


def _listen(args: argparse.Namespace) -> str | None:
    """``--listen`` as ``serve`` takes it (None: stdio); ValueError for a codex transport not here."""
    if args.stdio or args.listen == "stdio://":
        return None
    if args.listen.startswith("ws://"):
        return str(args.listen)
    raise ValueError(f"--listen takes stdio:// or ws://HOST:PORT, got {args.listen!r} (codex's unix:// and off "
                     "transports are not implemented)")


def _provider_environ(settings: CodexSettings, environ: Mapping[str, str]) -> Mapping[str, str]:
    """``environ`` with the chosen provider's key (``env_key``) as the API key."""
    variable = settings.api_key_env
    if variable is None:
        return environ
    key = environ.get(variable, "").strip()
    if not key:
        raise ValueError(f"-c model_providers.{settings.model_provider}.env_key names {variable}, which is not set: "
                         f"export {variable} with that provider's API key")
    return {**environ, "OPENAI_API_KEY": key}


def _template(settings: CodexSettings, cwd: Path) -> dict[str, Any]:
    """The ``AgentConfig`` fields every served thread starts from, from the overrides."""
    import trio_agent as ta

    template: dict[str, Any] = {}
    if settings.reasoning_effort is not None:
        template["thinking"] = settings.reasoning_effort
    sandbox = _sandbox(settings, cwd)
    if sandbox is not None:
        template["sandbox"] = sandbox
    policy = settings.approval_policy
    if policy is ta.ApprovalPolicy.ON_FAILURE:
        raise ValueError("-c approval_policy: on-failure has no app-server equivalent (the protocol's AskForApproval "
                         "is untrusted, on-request or never)")
    if policy is not None and policy is not ta.ApprovalPolicy.NEVER:
        # The server gives every thread its own hook (its clients decide); a template
        # with a policy other than never needs one, and this one is never called.
        template["approval"] = ta.Approvals(policy, hook=_replaced_by_the_server)
    elif policy is not None:
        template["approval"] = ta.Approvals(policy)
    return template


async def _replaced_by_the_server(request: ApprovalRequest) -> ApprovalDecision:
    from .._tools._security import ApprovalDecision

    return ApprovalDecision.DENY  # never reached: AppServer.configure replaces every thread's hook


def _sandbox(settings: CodexSettings, cwd: Path) -> Any:
    """The server's default ``ta.Sandbox`` (None: the library's default). Codex applies
    ``sandbox_workspace_write`` to the ``workspace-write`` mode only; relative writable
    roots are relative to the working directory."""
    import trio_agent as ta

    if settings.sandbox_mode is None and settings.network_access is None and settings.writable_roots is None:
        return None
    mode = settings.sandbox_mode or ta.SandboxMode.WORKSPACE_WRITE
    if mode is not ta.SandboxMode.WORKSPACE_WRITE:
        return ta.Sandbox(mode)
    try:
        return ta.Sandbox(mode, network=bool(settings.network_access),
                          writable_roots=tuple(cwd / root for root in settings.writable_roots or ()))
    except ta.ConfigError as exc:
        raise ValueError(f"-c sandbox_workspace_write.writable_roots: {exc}") from None
