"""``account/*``: what the server is signed in with, and an API key a client gives it.

Theory of operation (issue 22). The server's threads reach the model with the
credential ``trio-agent serve`` started with (``AgentConfig.auth``: ``OPENAI_API_KEY``,
or an existing Codex login), or with none when they talk to the built-in local model.
``account/read`` says which, honestly:

- an API key: ``{account: {type: "apiKey"}, requiresOpenaiAuth: true}``;
- a Codex (ChatGPT) login: ``{account: {type: "chatgpt", email: null, planType:
  "unknown"}, ...}`` -- the server does not decode the login's token, so it does not
  claim an email or a plan;
- the local model: ``{account: null, requiresOpenaiAuth: false}`` (as codex answers for
  a provider that needs no OpenAI login).

``account/login/start`` with ``{type: "apiKey", apiKey}`` sets the key the server's
threads use from then on: every thread loaded afterwards (started, forked, or resumed
from its rollout; a thread already loaded keeps its agent and its credential). The key
is kept in memory only -- never written to disk, never sent back -- and is the
server's, for every client, as codex's login is. It answers ``{type: "apiKey"}``, then
``account/login/completed`` (``success: true``) and ``account/updated`` (``authMode:
"apikey"``) go to every client. Other login types (a ChatGPT browser or device-code
login, external tokens, Bedrock) need codex's login machinery: they are refused
(-32600) saying to sign in with ``codex login`` and restart the server, which then uses
that login. On the local model an API key would change nothing (the endpoint stays
local): refused too. ``account/logout`` forgets the key a client gave; the credential
the server started with is its own and stays (``account/read`` shows it again).
``account/login/cancel`` has no browser login to cancel: ``notFound``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._connection import Connection, Reply
from ._jsonrpc import InvalidParams, InvalidRequest
from ._params import Params, shown

if TYPE_CHECKING:
    from ._context import ServerContext

__all__ = ["METHODS"]

MAX_KEY_LENGTH = 4096
_OTHER_LOGINS = ("chatgpt", "chatgptDeviceCode", "chatgptAuthTokens", "amazonBedrock", "amazonBedrockAccessKeys")


def _api_key(params: Params) -> str:
    key = params.get("apiKey")
    if not isinstance(key, str) or not key.strip():
        raise InvalidParams("account/login/start: `apiKey` must be a non-empty string (an OpenAI API key)")
    key = key.strip()
    if len(key) > MAX_KEY_LENGTH or not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
        raise InvalidParams("account/login/start: `apiKey` must be one printable ASCII token without spaces "
                            f"(at most {MAX_KEY_LENGTH} characters): it is sent as an HTTP Authorization header")
    return key


async def account_read(server: ServerContext, conn: Connection, params: Params) -> Reply:
    params.opt_bool("refreshToken")  # nothing to refresh: a Codex login refreshes itself when it must
    return Reply(server.account.read())


def _announce(server: ServerContext, *, login: bool) -> None:
    if login:
        server.broadcast("account/login/completed", {"loginId": None, "success": True, "error": None})
    server.broadcast("account/updated", {"authMode": server.account.auth_mode(), "planType": None})


async def account_login_start(server: ServerContext, conn: Connection, params: Params) -> Reply:
    kind = params.get("type")
    if kind in _OTHER_LOGINS:
        raise InvalidRequest(
            f"account/login/start: type {kind!r} is not supported by trio-agent serve (only \"apiKey\"); sign in "
            "with `codex login` and restart trio-agent serve, which then uses that login ($CODEX_HOME/auth.json)")
    if kind != "apiKey":
        raise InvalidParams(f"account/login/start: `type` must be \"apiKey\" (or one of {', '.join(_OTHER_LOGINS)}, "
                            f"which this server refuses), got {shown(kind)}")
    key = _api_key(params)
    if server.account.local:
        raise InvalidRequest(
            "account/login/start: this server runs the built-in local scripted model (--local, or no credential at "
            "start-up), whose endpoint an API key does not change; restart trio-agent serve with OPENAI_API_KEY "
            "set (without --local) to use the OpenAI API")
    server.account.given_key = key
    return Reply({"type": "apiKey"}, after=lambda: _announce(server, login=True))


async def account_logout(server: ServerContext, conn: Connection, params: Params) -> Reply:
    had_key = server.account.given_key is not None
    server.account.given_key = None
    return Reply({}, after=(lambda: _announce(server, login=False)) if had_key else None)


async def account_login_cancel(server: ServerContext, conn: Connection, params: Params) -> Reply:
    params.string("loginId")
    return Reply({"status": "notFound"})  # no browser or device-code login ever runs here


METHODS = {
    "account/read": account_read,
    "account/login/start": account_login_start,
    "account/logout": account_logout,
    "account/login/cancel": account_login_cancel,
}
