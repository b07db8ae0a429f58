"""OAuth for Streamable HTTP MCP servers, on the ``mcp`` SDK's ``OAuthClientProvider``.

Theory of operation. ``trio-agent mcp login NAME URL`` (``login``) runs the SDK's
authorization-code flow with PKCE against the server: discovery, dynamic client
registration, then the browser step -- it prints the authorization URL and waits for
the redirect on a loopback listener (``http://127.0.0.1:PORT/callback``, as codex's
``codex mcp login`` does) -- and stores what it got. An agent whose server is
``McpServer.http(url, oauth=True)`` (``agent_auth``) sends those tokens; the SDK
refreshes an expired access token with the refresh token and we store the new pair.
An agent never opens a browser: when a login is missing, refused or can no longer be
refreshed, the server fails (its calls say so) with the command to run.

Where the tokens are (codex's facts, our layout). Codex keeps MCP OAuth tokens in the
OS keyring, falling back to ``$CODEX_HOME/.credentials.json`` (mode 0600), keyed by
the server's name and a hash of its URL, with the client id, the access and refresh
tokens, the scopes and an absolute expiry, refreshed 30 s early. Here, one file per
server under the agent home (``$TRIO_AGENT_HOME``, else ``~/.trio-agent``):
``mcp-oauth/<name>-<16 hex of sha256 of the URL>.json``, mode 0600 in a 0700
directory, written whole (a temporary file renamed over it). A login for one URL is
never sent to another. The file holds the registered client (its secret, if the
authorization server gave one) and the tokens; nothing here logs or prints them. A
file others can read, or one that is not ours, is refused with what to do.

The SDK loads stored tokens without their expiry; ``_provider`` gives it the stored
one, so an access token that expired while the agent was not running is refreshed
before the first request instead of being sent and refused. Agents sharing a login
(forks, children, other processes) each refresh on their own; when a server rotates
refresh tokens the later refresh is refused, and that agent then takes the pair the
first one stored instead of failing. The SDK logs the
failures of its flow (``mcp.client.auth``) through ``logging``; a ``NullHandler`` there
keeps Python's last-resort handler from printing them on the host's stderr (a host
that configures logging still sees them); the error itself reaches the server's
failure message.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import trio

if TYPE_CHECKING:
    import httpx2
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

__all__ = [
    "McpLoginRequired",
    "McpOAuthError",
    "agent_auth",
    "agent_home",
    "login",
    "logout",
    "token_path",
]

_REFRESH_EARLY = 30.0  # seconds: refresh an access token this long before it expires (codex)
_MAX_REQUEST = 16 << 10  # the loopback listener reads at most this much of a request
_FORMAT = 1


class McpOAuthError(Exception):
    """A login could not be done or used; the message says why and what to do."""


class McpLoginRequired(McpOAuthError):
    """The server needs a login the agent does not have (missing, refused, or no longer
    refreshable)."""


def agent_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$TRIO_AGENT_HOME``, else ``~/.trio-agent`` (the CLI's sessions home too)."""
    env = os.environ if environ is None else environ
    return Path(env.get("TRIO_AGENT_HOME") or Path.home() / ".trio-agent").expanduser()


def token_path(home: Path, server: str, url: str) -> Path:
    digest = hashlib.sha256(json.dumps({"type": "http", "url": url}).encode()).hexdigest()[:16]
    return home / "mcp-oauth" / f"{server}-{digest}.json"


def _login_hint(server: str, url: str) -> str:
    return f"run `trio-agent mcp login {server} {url}`"


class TokenFile:
    """The SDK's ``TokenStorage`` over one server's token file (see the module docstring).
    ``fresh``: a new login, which ignores what the file holds and writes it only once it
    has tokens (a refused login leaves no half-made file)."""

    def __init__(self, path: Path, server: str, url: str, *, fresh: bool = False) -> None:
        self.path, self.server, self.url = path, server, url
        self.saved = False
        self._client: dict[str, Any] | None = None
        self._tokens: dict[str, Any] | None = None
        if not fresh:
            self._load()

    @property
    def expires_at(self) -> float | None:
        value = self._tokens.get("expires_at") if self._tokens else None
        return float(value) if isinstance(value, int | float) else None

    @property
    def redirect_uri(self) -> str:
        """The registered client's redirect URI (the agent's provider needs one, unused)."""
        uris = self._client.get("redirect_uris") if self._client else None
        return str(uris[0]) if isinstance(uris, list) and uris else "http://127.0.0.1/callback"

    @property
    def has_tokens(self) -> bool:
        return self._tokens is not None and self._client is not None

    def _load(self) -> None:
        path, hint = self.path, _login_hint(self.server, self.url)
        try:
            info = path.stat()
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise McpOAuthError(f"cannot read the MCP OAuth token file {path}: {exc.strerror or exc}") from None
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise McpOAuthError(
                f"the MCP OAuth token file {path} can be read by other users (mode "
                f"{stat.S_IMODE(info.st_mode):o}); its tokens may have leaked: delete it and {hint} "
                f"(or, if only you could read it, chmod 600 {path})"
            )
        try:
            data = json.loads(text)
            ok = (isinstance(data, dict) and data.get("format") == _FORMAT and data.get("server_url") == self.url
                  and isinstance(data.get("client"), dict) and isinstance(data.get("tokens"), dict))
            if ok:  # what the SDK will be given must be what it takes
                from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

                OAuthClientInformationFull.model_validate(data["client"])
                OAuthToken.model_validate({k: v for k, v in data["tokens"].items() if k != "expires_at"})
        except ValueError:  # not JSON, or a pydantic ValidationError (a ValueError)
            ok = False
        if not ok:
            raise McpOAuthError(f"the MCP OAuth token file {path} is not one trio-agent wrote for {self.url}: "
                                f"delete it and {hint}")
        self._client, self._tokens = data["client"], data["tokens"]

    def _write(self) -> None:
        data = {"format": _FORMAT, "server_name": self.server, "server_url": self.url,
                "client": self._client, "tokens": self._tokens}
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = directory / f".{self.path.name}.{os.getpid()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                os.fchmod(out.fileno(), 0o600)  # whatever the umask
                json.dump(data, out)
            os.replace(temporary, self.path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        self.saved = True

    def reload(self) -> bool:
        """Take the file's tokens when they are not the ones held here (another agent
        stored a newer pair since); True if it did."""
        try:
            current = TokenFile(self.path, self.server, self.url)
        except McpOAuthError:
            return False
        held = self._tokens.get("access_token") if self._tokens else None
        if current._tokens is None or current._tokens.get("access_token") == held:
            return False
        self._client, self._tokens = current._client, current._tokens
        return True

    # -- the SDK's TokenStorage --------------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken

        if self._tokens is None:
            return None
        fields = {k: v for k, v in self._tokens.items() if k != "expires_at"}
        return OAuthToken.model_validate(fields)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        value = tokens.model_dump(mode="json", exclude_none=True)
        if tokens.expires_in is not None:
            value["expires_at"] = time.time() + tokens.expires_in
        self._tokens = value
        if self._client is not None:
            self._write()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        return OAuthClientInformationFull.model_validate(self._client) if self._client is not None else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info.model_dump(mode="json", exclude_none=True)


@functools.cache
def _provider() -> type[Any]:
    """The SDK's provider, given the stored expiry (see the module docstring)."""
    from mcp.client.auth import OAuthClientProvider

    logging.getLogger("mcp.client.auth").addHandler(logging.NullHandler())

    class Provider(OAuthClientProvider):
        storage: TokenFile

        async def _initialize(self) -> None:
            await super()._initialize()
            self._take_expiry()

        def _take_expiry(self) -> None:
            expires_at = self.storage.expires_at
            self.context.token_expiry_time = expires_at - _REFRESH_EARLY if expires_at is not None else None

        async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
            if await super()._handle_refresh_response(response):
                return True
            # Another agent with this login (a fork, a child, another process) refreshed
            # first, and the server rotated away the refresh token sent here: its new
            # pair is in the file.
            if not self.storage.reload():
                return False
            self.context.current_tokens = await self.storage.get_tokens()
            self._take_expiry()
            return bool(self.context.is_token_valid())

    return Provider


def _metadata(redirect_uri: str) -> Any:
    from mcp.shared.auth import OAuthClientMetadata

    return OAuthClientMetadata.model_validate({
        "client_name": "trio-agent", "redirect_uris": [redirect_uri], "response_types": ["code"],
        "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none",
    })


def agent_auth(server: str, url: str, home: Path | None = None) -> httpx2.Auth:
    """The ``httpx2`` auth an agent connects to ``server`` with: its stored login
    (``McpLoginRequired`` when there is none; ``McpOAuthError`` for a bad file)."""
    store = TokenFile(token_path(home or agent_home(), server, url), server, url)
    hint = _login_hint(server, url)
    if not store.has_tokens:
        raise McpLoginRequired(f"MCP server {server} needs an OAuth login: {hint}")

    async def no_browser(_: str) -> None:
        raise McpLoginRequired(f"MCP server {server}: its OAuth login expired or was revoked and could not be "
                               f"refreshed: {hint}")

    async def no_callback() -> AuthorizationCodeResult:
        raise McpLoginRequired(f"MCP server {server} needs a new OAuth login: {hint}")

    provider = _provider()(url, _metadata(store.redirect_uri), store, redirect_handler=no_browser,
                           callback_handler=no_callback)
    provider.storage = store
    return provider  # type: ignore[no-any-return]


def logout(server: str, url: str, home: Path | None = None) -> Path | None:
    """Delete the stored login; its path, or None when there was none."""
    path = token_path(home or agent_home(), server, url)
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    return path


# -- the login (trio-agent mcp login) ------------------------------------------------------


async def login(server: str, url: str, *, announce: Callable[[str], Awaitable[None]], home: Path | None = None,
                port: int = 0) -> Path:
    """Log in to ``server`` at ``url`` (see the module docstring); the token file's path.
    ``announce`` is given the authorization URL (print it, open a browser); the login
    then waits for the redirect to the loopback listener on ``port`` (0: any free one)
    -- the caller bounds it. ``McpOAuthError`` says what went wrong."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import Implementation

    from .._transport.auth import VERSION

    path = token_path(home or agent_home(), server, url)
    store = TokenFile(path, server, url, fresh=True)
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    callback = _Callback()
    redirect = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/callback"
    provider = _provider()(url, _metadata(redirect), store, redirect_handler=announce, callback_handler=callback.wait)
    provider.storage = store
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, callback.handle, listeners)
            async with httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30.0)) as http, \
                    Client(streamable_http_client(url, http_client=http), cache=None,
                           client_info=Implementation(name="trio-agent", version=VERSION)) as client:
                await client.list_tools()
            nursery.cancel_scope.cancel()
    except BaseException as exc:
        found = _oauth_error(exc)
        if found is None:
            raise
        raise found from None
    if not store.saved:
        raise McpOAuthError(f"MCP server {server} at {url} did not ask for an OAuth login: it needs none")
    return path


def _oauth_error(exc: BaseException) -> McpOAuthError | None:
    """The error to report for a failed login: ours, the SDK's OAuth error, or a
    connection error (None: something else, e.g. a cancellation)."""
    from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

    leaves: list[BaseException] = []

    def walk(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                walk(inner)
        else:
            leaves.append(error)
            if error.__cause__ is not None:
                walk(error.__cause__)

    walk(exc)
    for leaf in leaves:
        if isinstance(leaf, McpOAuthError):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, OAuthFlowError | OAuthRegistrationError | OAuthTokenError):
            return McpOAuthError(f"the authorization server refused: {type(leaf).__name__}: {leaf}"[:2000])
    if all(isinstance(leaf, trio.Cancelled) for leaf in leaves):
        return None
    shown = "; ".join(dict.fromkeys(f"{type(leaf).__name__}: {leaf}" for leaf in leaves[:3]))
    return McpOAuthError(f"the login failed: {shown}"[:2000])


class _Callback:
    """The loopback listener's side of the browser step: the first ``/callback`` request
    carries the code (or the authorization server's refusal)."""

    def __init__(self) -> None:
        self._done = trio.Event()
        self._query: dict[str, str] = {}

    async def wait(self) -> AuthorizationCodeResult:
        from mcp.shared.auth import AuthorizationCodeResult

        await self._done.wait()
        query = self._query
        if "error" in query:
            detail = f" ({query['error_description']})" if query.get("error_description") else ""
            raise McpOAuthError(f"the authorization server refused the login: {query['error']}{detail}"[:1000])
        if not query.get("code"):
            raise McpOAuthError("the redirect to the loopback listener carried no authorization code")
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    async def handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            request = b""
            with trio.move_on_after(10):
                while b"\r\n\r\n" not in request and len(request) < _MAX_REQUEST:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    request += chunk
            line = request.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            target = urlsplit(line[1]) if len(line) == 3 and line[0] == "GET" else None
            if target is None or target.path != "/callback" or self._done.is_set():
                await _answer(stream, 404, "Not the login callback.")
                return
            self._query = {key: values[0] for key, values in parse_qs(target.query).items()}
            self._done.set()
            refused = "error" in self._query
            await _answer(stream, 400 if refused else 200, "The login was refused; see the terminal."
                          if refused else "Logged in: trio-agent has the authorization. You can close this page.")


async def _answer(stream: trio.SocketStream, status: int, text: str) -> None:
    body = text.encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    try:
        await stream.send_all(head + body)
    except trio.BrokenResourceError:
        pass
