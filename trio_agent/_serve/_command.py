"""``trio-agent serve``: the app server with the model configured as ``trio-agent run``
does (``cli._connection.connection_settings``: an API key from ``OPENAI_API_KEY``, else an
existing Codex login, else the built-in local scripted model, labelled on stderr; the
same endpoint options and environment), on stdio or on a WebSocket listener.

The listener's options (``cli._serve_options``) become its ``ListenerPolicy`` before
anything starts: a bad option, an unreadable or group/other-readable token file, or
an address beyond loopback without ``--ws-auth`` exits 2 with one line saying why
and what to do, without opening a socket. On loopback without a token one stderr line
says that any local user can connect."""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio

from .._collector import tune_collector
from .._tools._sandbox_hide import hide_from_commands
from ..cli._connection import Connection
from ..cli._serve_options import DEFAULT_MAX_CONNECTIONS, listener_options_given
from ..cli._signals import exit_now
from ._listen_policy import (
    ListenerPolicy,
    check_exposure,
    digest_from_hex,
    is_loopback,
    normalise_origin,
    token_from_env,
    token_from_file,
)
from ._server import AppServer, open_app_server
from ._transports import serve_stdio, serve_websocket

__all__ = ["listener_policy", "parse_listen", "serve_main"]

Listen = tuple[str, int, ListenerPolicy, int]  # host, port, policy, max connections


def parse_listen(url: str) -> tuple[str, int]:
    """``ws://HOST:PORT`` as ``(host, port)``; ``ValueError`` saying what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != "ws" or not parts.hostname:
        raise ValueError(f"--listen takes ws://HOST:PORT (for example ws://127.0.0.1:4500), got {url!r}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise ValueError(f"--listen needs a port: ws://{parts.hostname}:PORT (0 picks a free one), got {url!r}")
    return parts.hostname, port


def listener_policy(args: argparse.Namespace, environ: Mapping[str, str]) -> ListenerPolicy:
    """The ``ListenerPolicy`` of ``--allow-origin`` and ``--ws-auth``/``--ws-token-*``
    (``ValueError`` saying what is wrong)."""
    try:
        origins = frozenset(normalise_origin(origin) for origin in args.allow_origin)
    except ValueError as exc:
        raise ValueError(f"--allow-origin: {exc}") from None
    sources = [
        (flag, value)
        for flag, value in (
            ("--ws-token-file", args.ws_token_file),
            ("--ws-token-sha256", args.ws_token_sha256),
            ("--ws-token-env", args.ws_token_env),
        )
        if value is not None
    ]
    if args.ws_auth is None:
        if sources:
            raise ValueError(f"{sources[0][0]} needs --ws-auth capability-token")
        return ListenerPolicy(origins)
    if len(sources) != 1:
        raise ValueError(
            "--ws-auth capability-token takes exactly one of --ws-token-file PATH, --ws-token-sha256 HEX "
            f"or --ws-token-env VAR (given: {', '.join(flag for flag, _ in sources) or 'none'})"
        )
    flag, value = sources[0]
    if flag == "--ws-token-sha256":
        return ListenerPolicy(origins, digest_from_hex(value))
    token = token_from_file(value) if flag == "--ws-token-file" else token_from_env(value, environ)
    return ListenerPolicy.with_token(token, allowed_origins=origins)


def _listen(args: argparse.Namespace) -> Listen | None:
    """Where and under which policy to listen (None: stdio); ``ValueError`` saying why not."""
    if not args.listen:
        given = [flag for flag, value in listener_options_given(args) if value is not None and value != []]
        if given:
            raise ValueError(f"{given[0]} applies to the WebSocket listener; add --listen ws://127.0.0.1:PORT")
        return None
    host, port = parse_listen(args.listen)
    policy = listener_policy(args, os.environ)
    if args.ws_token_env:
        # The token is the server's alone once read: the commands its threads run inherit
        # this environment, and a name that does not look secret (WS_CAP) is not scrubbed.
        os.environ.pop(args.ws_token_env, None)
    if args.ws_token_file:
        # Nor may they read it from the file: the sandboxes of its threads' commands mask it.
        hide_from_commands(args.ws_token_file)
    check_exposure(host, policy)
    limit = DEFAULT_MAX_CONNECTIONS if args.max_connections is None else args.max_connections
    if limit < 1:
        raise ValueError(f"--max-connections takes a number of connections >= 1, got {limit}")
    return host, port, policy, limit


def _say(message: str) -> None:
    print(f"trio-agent serve: {message}", file=sys.stderr, flush=True)


def serve_main(args: argparse.Namespace, connection: Connection, *, template: Mapping[str, Any] | None = None) -> int:
    """Serve until stdin ends (stdio) or a signal; ``template``: more ``AgentConfig`` fields
    of every thread (``trio-agent app-server``'s ``-c`` overrides)."""
    try:
        listen = _listen(args)
    except ValueError as exc:
        _say(str(exc))
        return 2
    if not (args.unload_delay >= 0 and math.isfinite(args.unload_delay)):
        _say(f"--unload-delay must be a number of seconds >= 0, got {args.unload_delay}")
        return 2
    if listen is None:
        sys.stdout = sys.stderr  # stdout carries the protocol: nothing else may print there
    return trio.run(_serve, args, connection, listen, dict(template or {}))


async def _serve(
    args: argparse.Namespace, connection: Connection, listen: Listen | None, template: dict[str, Any]
) -> int:
    import trio_agent as ta

    home = Path(args.home or os.environ.get("TRIO_AGENT_HOME") or Path.home() / ".trio-agent")
    async with trio.open_nursery() as nursery:
        responses, provider = dict(connection.responses), "openai"
        if connection.credential_note is not None:
            _say(connection.credential_note)
        if connection.local_reason is not None:
            from .._local_model import serve_local_model

            _say(f"{connection.local_reason}; using the built-in local scripted model (not a real model)")
            model_server = await nursery.start(serve_local_model)
            responses["websocket_url"], provider = model_server.url, "trio-agent-local"
            responses["profile"] = ta.Profile.OPENAI  # the local model speaks OpenAI's dialect
        try:
            config = ta.AgentConfig(
                auth=connection.key or "local-key",
                workspace=args.workspace or Path.cwd(),
                responses=ta.Responses(**responses),
                **({"model": args.model} if args.model else {}),
                **template,
            )
        except ta.ConfigError as exc:
            _say(str(exc))
            nursery.cancel_scope.cancel()
            return 2
        async with open_app_server(
            config,
            home=home,
            unload_delay=args.unload_delay,
            model_provider=provider,
            multi_agent=args.multi_agent,
            web_search=not args.no_web_search,
        ) as app:
            _say(f"threads live under {home}")
            tune_collector()  # started: what exists now lives as long as the server (``_collector``)
            if app.multi_agent:
                _say("threads have the collaboration tools; their workers are child threads (--multi-agent)")
            await _run_transport(app, listen)
        nursery.cancel_scope.cancel()
    return 0


async def _run_transport(app: AppServer, listen: Listen | None) -> None:
    async with trio.open_nursery() as nursery:

        async def stop() -> None:
            await app.aclose()
            nursery.cancel_scope.cancel()

        async def stop_on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                stopping = False
                async for signum in signals:
                    if stopping:  # a second signal while shutting down: exit at once
                        exit_now(signum)
                    stopping = True
                    _say(
                        f"{signal.Signals(signum).name}: shutting down (threads are cancelled, rollouts flushed; "
                        "again to exit at once)"
                    )
                    nursery.start_soon(stop)

        nursery.start_soon(stop_on_signal)
        if listen is None:
            _say("serving the Codex app-server protocol on stdio (one JSON-RPC message per line)")
            await serve_stdio(app)
            nursery.cancel_scope.cancel()
            return
        host, port, policy, limit = listen
        listener = await nursery.start(partial(serve_websocket, app, host, port, policy=policy, max_connections=limit))
        for bound in listener.listeners:
            address, bound_port = bound.socket.getsockname()[:2]
            _say(f"listening on ws://{f'[{address}]' if ':' in address else address}:{bound_port}")
        if not policy.requires_token and is_loopback(host):
            _say(
                "no --ws-auth: any local user or program that can reach this port can connect and run commands as "
                "you; require a token with --ws-auth capability-token --ws-token-file PATH"
            )
