"""``trio-agent mcp login NAME URL`` and ``trio-agent mcp logout NAME URL``: the OAuth
login of a Streamable HTTP MCP server, as ``codex mcp login`` does it.

``login`` prints the authorization URL on stdout (and opens a browser unless
``--no-browser``), waits for the authorization server's redirect on a loopback listener
(``--port``, default any free one) and stores the tokens under the agent home
(``$TRIO_AGENT_HOME``, else ``~/.trio-agent``; ``_tools/_mcp_oauth.py`` says where and
how); the agent then uses them for ``McpServer.http(URL, oauth=True)`` -- and
``trio-agent run --mcp NAME=URL`` whenever a login is stored for that name and URL.
Exit status 0 when logged in (or out), 1 when the login failed (one line saying why),
2 for a bad command line. The tokens are never printed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import trio

from ._parser import SubcommandParser, refuse

__all__ = ["add_mcp_command", "mcp_main"]


def add_mcp_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser("mcp", help="log in to (or out of) an MCP server that needs OAuth")
    actions = mcp.add_subparsers(dest="mcp_command", required=True, parser_class=SubcommandParser)
    login = actions.add_parser(
        "login", help="log in to a Streamable HTTP MCP server with OAuth and store its tokens",
        description="Run the server's OAuth login in a browser and store the tokens under $TRIO_AGENT_HOME "
                    "(else ~/.trio-agent), for McpServer.http(URL, oauth=True) and --mcp NAME=URL.",
    )
    logout = actions.add_parser("logout", help="delete the stored OAuth tokens of an MCP server")
    for parser in (login, logout):
        parser.add_argument("name", help="the server's name (its tools are mcp__NAME__TOOL)")
        parser.add_argument("url", help="the server's Streamable HTTP URL, as the agent is given it")
    login.add_argument("--port", type=int, default=0,
                       help="the loopback port of the redirect listener (default: any free one)")
    login.add_argument("--no-browser", action="store_true", help="only print the URL to open")
    login.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                       help="give up after SECONDS (default 300)")


def mcp_main(args: argparse.Namespace) -> int:
    import trio_agent as ta

    from .._tools._mcp_config import check_server_name

    prog = f"trio-agent mcp {args.mcp_command}"
    try:
        check_server_name(args.name)
        ta.McpServer.http(args.url)
    except ta.ConfigError as exc:
        refuse(prog, str(exc))
    if args.mcp_command == "logout":
        from .._tools._mcp_oauth import logout

        removed = logout(args.name, args.url)
        print(f"Logged out of {args.name}: deleted {removed}" if removed else f"No login was stored for {args.name}",
              file=sys.stderr)
        return 0
    if not 0 <= args.port <= 65535 or args.timeout <= 0:
        refuse(prog, "--port must be 0-65535 and --timeout a positive number of seconds")
    return trio.run(_login, args)


async def _login(args: Any) -> int:
    from .._tools._mcp_oauth import McpOAuthError, login

    async def announce(url: str) -> None:
        print(f"To log in to MCP server {args.name}, open this URL in your browser:", file=sys.stderr, flush=True)
        print(url, flush=True)
        if not args.no_browser:
            import webbrowser

            await trio.to_thread.run_sync(webbrowser.open, url, abandon_on_cancel=True)

    try:
        with trio.fail_after(args.timeout):
            path = await login(args.name, args.url, announce=announce, port=args.port)
    except trio.TooSlowError:
        print(f"trio-agent mcp login: error: no login within {args.timeout:g} s", file=sys.stderr)
        return 1
    except (McpOAuthError, OSError) as exc:
        print(f"trio-agent mcp login: error: {exc}", file=sys.stderr)
        return 1
    print(f"Logged in to {args.name}; the tokens are in {path}", file=sys.stderr)
    return 0
