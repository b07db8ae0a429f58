"""``trio-agent serve``'s WebSocket listener options: who and how many may connect
(docs/app-server.md "Security"). Only the parser is here (the CLI's start-up imports it); the policy is
built from them by ``_serve._command.listener_policy``, when ``serve`` runs."""

from __future__ import annotations

import argparse

__all__ = ["DEFAULT_MAX_CONNECTIONS", "add_listener_options", "listener_options_given"]

#: ``--max-connections``'s default (``_serve._transports.serve_websocket``'s too): ample for
#: one user's front ends, and with the front door's 32 it keeps the listener's sockets
#: well below the usual 1024 descriptors, leaving the rest to the threads' own files,
#: model connections and commands (docs/app-server.md, Security).
DEFAULT_MAX_CONNECTIONS = 64

_FLAGS = (("--allow-origin", "allow_origin"), ("--ws-auth", "ws_auth"), ("--ws-token-file", "ws_token_file"),
          ("--ws-token-sha256", "ws_token_sha256"), ("--ws-token-env", "ws_token_env"),
          ("--max-connections", "max_connections"))


def add_listener_options(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group(
        "who and how many may connect to --listen",
        "Any handshake with an Origin header (a web page) is refused unless --allow-origin names it; beyond "
        "loopback a capability token is required; at most --max-connections are served (docs/app-server.md, "
        "Security).")
    group.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                       help="allow WebSocket handshakes from this browser origin (scheme://host[:port]; repeatable)")
    group.add_argument("--ws-auth", choices=["capability-token"], default=None,
                       help="require `Authorization: Bearer <token>` on every WebSocket handshake (HTTP 401 otherwise)")
    group.add_argument("--ws-token-file", default=None, metavar="PATH",
                       help="the token: the first line of PATH (a file only its owner may read)")
    group.add_argument("--ws-token-sha256", default=None, metavar="HEX", help="the token's SHA-256, 64 hex digits")
    group.add_argument("--ws-token-env", default=None, metavar="VAR", help="the token: the environment variable VAR")
    group.add_argument("--max-connections", type=int, default=None, metavar="N",
                       help=f"serve at most N WebSocket connections at once; the next handshake gets HTTP 503 "
                            f"(default {DEFAULT_MAX_CONNECTIONS})")


def listener_options_given(args: argparse.Namespace) -> list[tuple[str, object]]:
    """``(flag, value)`` of each listener option (for checks that list what was given)."""
    return [(flag, getattr(args, name, None)) for flag, name in _FLAGS]
