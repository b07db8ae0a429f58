"""How a command reaches the model: the connection options that ``run``, ``serve``,
``app-server`` and ``exec`` share, their environment defaults, the credential
(``OPENAI_API_KEY``, else an existing Codex login) and the :class:`Connection` they make.

Parsing is pure: nothing starts, no Trio. Every bad value, from a flag or from the
environment, is an argparse error (usage line, message, exit status 2) that names
the flag or variable and says what to do. Environment defaults are read here, not as
argparse defaults, so that an error names the variable it came from; they apply to
the real API only (the local scripted model ignores them), while the flags
themselves need a credential: an endpoint without one is refused, never a silent
switch to the local model.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio_agent as ta

from .._record import Record

__all__ = ["Connection", "add_connection_options", "connection_settings", "profile_of"]

#: The variables that name a Responses endpoint (they need a credential, as their flags do).
_ENDPOINT_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_BASE_URL", "OPENAI_RESPONSES_WEBSOCKET_URL")
_TRANSPORTS = {"websocket": "websocket", "ws": "websocket", "https": "https", "http": "https"}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of attempts >= 1, got {text!r}")
    return value


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """The model connection options, shared by ``trio-agent run`` and ``trio-agent serve``."""
    model = parser.add_argument_group("model connection (the real API; need OPENAI_API_KEY or a Codex login)")
    model.add_argument("--api-base", default=None, metavar="URL",
                       help="HTTPS base URL of the Responses API; the WebSocket URL is derived from it "
                            "(https://H/v1 -> wss://H/v1/responses) (default: $OPENAI_BASE_URL, "
                            "else https://api.openai.com/v1)")
    model.add_argument("--websocket-url", default=None, metavar="URL",
                       help="the WebSocket endpoint itself, ws:// or wss:// "
                            "(default: $OPENAI_RESPONSES_WEBSOCKET_URL, else derived from --api-base)")
    model.add_argument("--transport", choices=["websocket", "https"], default=None,
                       help="a persistent WebSocket, or one HTTPS request with server-sent events per "
                            "model call (default: $NANOCODEX_RESPONSES_TRANSPORT, else websocket)")
    model.add_argument("--max-attempts", type=_positive_int, default=None, metavar="N",
                       help="attempts per model call before the turn fails (default: 5)")
    model.add_argument("--profile", choices=[profile.value for profile in ta.Profile], default=None,
                       help="the server's dialect: openai (OpenAI's own wire: in-band tools, stored and chained "
                            "responses, the warmup) or generic (public Responses semantics for LiteLLM, vLLM, "
                            "Ollama, llama-stack and bridges: top-level tools, store false, the whole conversation "
                            "every request) (default: $TRIO_AGENT_PROFILE, else openai for OpenAI's hosts and "
                            "generic for any other; docs/compatibility.md)")
    model.add_argument("--store", dest="store", action="store_true", default=None,
                       help="ask the server to store responses (store: true) (default: true with an API key on "
                            "OpenAI's servers, false elsewhere)")
    model.add_argument("--no-store", dest="store", action="store_false",
                       help="store: false; over HTTPS every request then carries the whole conversation")
    model.add_argument("--history", choices=["incremental", "full"], default=None,
                       help="incremental: chain each request on the previous response (previous_response_id); "
                            "full: send the whole conversation every time (default: incremental where the server "
                            "keeps responses, full otherwise)")


class Connection(Record):
    """How a command reaches the model: the credential ``key`` (``OPENAI_API_KEY``, else
    an existing Codex login's), ``local_reason`` (why the local scripted model answers;
    None: the real API), ``credential_note`` (where the credential came from, when not
    ``OPENAI_API_KEY``) and ``responses`` (``ta.Responses`` keyword arguments)."""

    __slots__ = ("key", "local_reason", "credential_note", "responses")  # noqa: RUF023  # field order

    def __init__(self, *, key: str | ta.ChatGptAuth, local_reason: str | None, credential_note: str | None,
                 responses: dict[str, Any]) -> None:
        self.key = key
        self.local_reason = local_reason
        self.credential_note = credential_note
        self.responses = responses


def connection_settings(parser: argparse.ArgumentParser, args: argparse.Namespace,
                        environ: Mapping[str, str]) -> Connection:
    """The options of :func:`add_connection_options` and ``--local``, with the
    environment, checked; ``parser.error`` (exit 2) on a bad value."""
    key: str | ta.ChatGptAuth = environ.get("OPENAI_API_KEY", "").strip()
    credential_note = None
    if args.local:
        _refuse_local_with_endpoints(parser, args, has_credential=bool(key) or _login_path(environ).exists())
        local_reason: str | None = "--local given"
    elif key:
        local_reason = None
    else:
        key, local_reason, credential_note = _codex_login(parser, environ)
    return Connection(key=key, local_reason=local_reason, credential_note=credential_note,
                      responses=_responses(parser, args, environ, local_reason))


def _login_path(environ: Mapping[str, str]) -> Path:
    from .._codex_login import codex_auth_path

    return codex_auth_path(environ.get("CODEX_HOME") or str(Path.home() / ".codex"))


def _endpoint_flags(args: argparse.Namespace) -> list[str]:
    """The options given that configure the real Responses API's endpoint."""
    config_base: tuple[str, str] | None = getattr(args, "config_base_url", None)
    return [flag for flag, value in (("--api-base", args.api_base), (config_base or ("-c", None)),
                                     ("--websocket-url", args.websocket_url),
                                     ("--transport https", args.transport == "https")) if value]


def _refuse_local_with_endpoints(parser: argparse.ArgumentParser, args: argparse.Namespace, *,
                                 has_credential: bool) -> None:
    """``--local`` with an endpoint option: drop one of them (the key is not the problem)."""
    given = _endpoint_flags(args)
    if given:
        needs = "" if has_credential else " (and set OPENAI_API_KEY: any value for a server that ignores it)"
        parser.error(f"{given[0]} configures the real Responses API, and --local uses the built-in local scripted "
                     f"model instead: drop --local to use the real API{needs}, or drop {given[0]}")


def _codex_login(
    parser: argparse.ArgumentParser, environ: Mapping[str, str]
) -> tuple[str | ta.ChatGptAuth, str | None, str | None]:
    """Without ``OPENAI_API_KEY``: an existing Codex login (``$CODEX_HOME/auth.json``, else
    ``~/.codex/auth.json``) when there is one -- a broken one is an error, never a silent
    switch to the local model -- else the local scripted model. Returns the credential,
    the local model's reason (None: the real API) and a note naming the login used."""
    home = environ.get("CODEX_HOME") or str(Path.home() / ".codex")
    path = _login_path(environ)
    if not path.exists():
        return "", f"no OPENAI_API_KEY set and no Codex login at {path}", None
    try:
        credential = ta.ChatGptAuth.from_codex_home(home)
    except ta.ConfigError as exc:
        parser.error(f"{exc} (or set OPENAI_API_KEY, or pass --local)")
    mode = "an API key" if isinstance(credential, str) else "ChatGPT"
    return credential, None, f"signed in with the Codex login at {path} ({mode})"


def _responses(parser: argparse.ArgumentParser, args: argparse.Namespace, environ: Mapping[str, str],
               local_reason: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.max_attempts is not None:
        options["max_attempts"] = args.max_attempts
    if local_reason is not None:
        if not args.local:
            _refuse_endpoints_without_credential(parser, args, environ, local_reason)
        return options
    sources = [("--api-base", args.api_base), getattr(args, "config_base_url", None) or ("-c", None),
               ("OPENAI_BASE_URL", environ.get("OPENAI_BASE_URL")),
               ("OPENAI_API_BASE_URL", environ.get("OPENAI_API_BASE_URL"))]
    base = next(((name, value.strip()) for name, value in sources if value and value.strip()), None)
    if base is not None:
        options["api_base_url"] = _url(parser, *base, ("http://", "https://"), "https://api.openai.com/v1")
    websocket = args.websocket_url or environ.get("OPENAI_RESPONSES_WEBSOCKET_URL", "").strip()
    if websocket:
        name = "--websocket-url" if args.websocket_url else "OPENAI_RESPONSES_WEBSOCKET_URL"
        options["websocket_url"] = _url(parser, name, websocket, ("ws://", "wss://"), "wss://api.openai.com/v1/responses")
    transport = args.transport
    if transport is None and environ.get("NANOCODEX_RESPONSES_TRANSPORT", "").strip():
        value = environ["NANOCODEX_RESPONSES_TRANSPORT"].strip()
        transport = _TRANSPORTS.get(value.lower())
        if transport is None:
            parser.error(f"NANOCODEX_RESPONSES_TRANSPORT={value!r} is not a transport: set it to websocket or "
                         "https, or unset it")
    if transport is not None:
        options["transport"] = ta.Transport.HTTPS if transport == "https" else ta.Transport.WEBSOCKET
    profile = args.profile
    if profile is None and environ.get("TRIO_AGENT_PROFILE", "").strip():
        value = environ["TRIO_AGENT_PROFILE"].strip()
        if value.lower() not in {p.value for p in ta.Profile}:
            parser.error(f"TRIO_AGENT_PROFILE={value!r} is not a profile: set it to openai or generic, or unset it")
        profile = value.lower()
    if profile is not None:
        options["profile"] = ta.Profile(profile)
    if args.store is not None:
        options["store"] = args.store
    if args.history is not None:
        options["history"] = ta.History.FULL_REPLAY if args.history == "full" else ta.History.INCREMENTAL
    if options.get("history") is ta.History.INCREMENTAL and options.get("store") is False \
            and options.get("transport") is ta.Transport.HTTPS:
        parser.error("--history incremental with --no-store over --transport https cannot work: HTTPS chains only "
                     "on stored responses; drop --no-store, or use --history full")
    return options


def profile_of(responses: Mapping[str, Any]) -> ta.Profile:
    """The profile ``ta.Responses(**responses)`` speaks (given, else from the endpoint)."""
    keys = ("profile", "transport", "websocket_url", "api_base_url")
    return ta.Responses(**{key: responses[key] for key in keys if key in responses}).profile


def _refuse_endpoints_without_credential(parser: argparse.ArgumentParser, args: argparse.Namespace,
                                        environ: Mapping[str, str], local_reason: str) -> None:
    """An endpoint option or variable with no credential: exit 2 (never a silent switch
    to the local model). The variables count as their flags do; ``--local`` ignores them."""
    variables = [f"{name}={environ[name].strip()!r}" for name in _ENDPOINT_VARIABLES if environ.get(name, "").strip()]
    flags = _endpoint_flags(args)
    if not flags and not variables:
        return
    given = flags[0] if flags else variables[0]
    fix = f"drop {given}" if flags else f"unset {given.split('=')[0]} (or pass --local)"
    parser.error(f"{given} talks to a real Responses API, which needs a credential, but {local_reason}: "
                 f"set OPENAI_API_KEY (any value for a server that ignores it), or {fix} to use the built-in local "
                 "scripted model")


def _url(parser: argparse.ArgumentParser, name: str, value: str, schemes: tuple[str, ...], example: str) -> str:
    if not value.startswith(schemes) or len(value) <= len(value.split("//", 1)[0]) + 2:
        where = f"{name} {value!r}" if name.startswith("--") else f"{name}={value!r}"
        parser.error(f"{where} is not a {' or '.join(s.rstrip(':/') for s in schemes)} URL; "
                     f"pass a full URL such as {example}")
    return value.rstrip("/")
