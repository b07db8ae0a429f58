"""Sign in with an existing Codex login: ``$CODEX_HOME/auth.json`` (else ``~/.codex/auth.json``).

The file is the Codex CLI's (facts: reference/nanocodex.md sec. 6.5). In API-key mode it
holds ``OPENAI_API_KEY``; in ChatGPT mode ``tokens {id_token, access_token,
refresh_token, account_id}`` and ``last_refresh``. ``CodexAuthFile`` is a
``ChatGptAuthSource``: ``snapshot()`` returns the access token and account id,
refreshing it first when it expires within five minutes; ``recover_unauthorized()``
(after a 401) refreshes once. A refresh is ``POST {token_url}`` with JSON
``{client_id, grant_type: "refresh_token", refresh_token}``; the new tokens are written
back atomically (a temporary file renamed over the old one, mode 0600), keeping every
other field. If another process rotated the file meanwhile, its tokens are used
instead of refreshing again. An unreadable or malformed file is a clear error, never a
silent fallback; a refused refresh (``refresh_token_expired``/``reused``/``invalidated``,
HTTP 401) says to log in again.

File reads and the atomic write are small synchronous calls on the Trio thread; the
refresh request is httpx (imported lazily) with a 30 s timeout on Trio's clock.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import os
from pathlib import Path
from typing import Any, final

import trio

from ._base.auth import ChatGptAuth, ChatGptAuthSnapshot
from ._errors import AuthenticationError, ConfigError

__all__ = ["CLIENT_ID", "TOKEN_URL", "CodexAuthFile", "codex_auth_path", "from_codex_home"]

TOKEN_URL = "https://auth.openai.com/oauth/token"
CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
REFRESH_MARGIN = 300.0  # seconds before expiry
REFRESH_TIMEOUT = 30.0
_REFUSED_CODES = {"refresh_token_expired", "refresh_token_reused", "refresh_token_invalidated"}


def codex_auth_path(codex_home: str | Path | None = None) -> Path:
    """``<codex_home>/auth.json``: the argument, else ``$CODEX_HOME``, else ``~/.codex``."""
    if codex_home is None:
        codex_home = os.environ.get("CODEX_HOME") or Path.home() / ".codex"
    return Path(codex_home).expanduser() / "auth.json"


def _jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (unverified: only to know when to refresh)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    padded = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the Codex login {path}: {exc.strerror or exc}; run `codex login`") from exc
    except ValueError as exc:
        raise ConfigError(f"the Codex login {path} is not JSON ({exc}); run `codex login` again") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"the Codex login {path} is not a JSON object; run `codex login` again")
    return data


def _tokens(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    tokens = data.get("tokens")
    if not isinstance(tokens, dict) or not isinstance(tokens.get("access_token"), str) or not tokens["access_token"]:
        raise ConfigError(f"the Codex login {path} has no ChatGPT access token; run `codex login` again")
    return tokens


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(data, file, indent=2)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@final
class CodexAuthFile:
    """A ``ChatGptAuthSource`` backed by a Codex ``auth.json`` (see the module docstring)."""

    def __init__(self, path: str | Path, *, token_url: str = TOKEN_URL, client_id: str = CLIENT_ID) -> None:
        self.path = Path(path)
        self._token_url = token_url
        self._client_id = client_id
        self._lock = trio.Lock()

    def __repr__(self) -> str:
        return f"CodexAuthFile({str(self.path)!r})"

    def validate(self) -> None:
        _tokens(self.path, _read(self.path))

    async def snapshot(self) -> ChatGptAuthSnapshot:
        async with self._lock:
            data = _read(self.path)
            tokens = _tokens(self.path, data)
            expiry = _jwt_expiry(tokens["access_token"])
            if expiry is not None and expiry - _wall_now() < REFRESH_MARGIN:
                tokens = await self._refresh(data, tokens["access_token"])
            return ChatGptAuthSnapshot(tokens["access_token"], _account(tokens))

    async def recover_unauthorized(self, rejected: ChatGptAuthSnapshot) -> None:
        async with self._lock:
            data = _read(self.path)
            await self._refresh(data, rejected.token)

    async def _refresh(self, data: dict[str, Any], stale: str) -> dict[str, Any]:
        tokens = _tokens(self.path, data)
        if tokens["access_token"] != stale:
            return tokens  # another process rotated the file: use its tokens
        refresh_token = tokens.get("refresh_token")
        if not isinstance(refresh_token, str) or not refresh_token:
            raise AuthenticationError(
                f"the Codex login {self.path} has no refresh token; run `codex login` again", error_class="auth_source"
            )
        fresh = await self._request(refresh_token)
        tokens = {**tokens, **{k: v for k, v in fresh.items() if k in ("id_token", "access_token", "refresh_token")}}
        data = {**data, "tokens": tokens,
                "last_refresh": datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")}
        try:
            _write_atomically(self.path, data)
        except OSError as exc:
            raise AuthenticationError(
                f"refreshed the ChatGPT token but could not save it to {self.path}: {exc.strerror or exc}",
                error_class="auth_source",
            ) from exc
        return tokens

    async def _request(self, refresh_token: str) -> dict[str, Any]:
        import httpx

        body = {"client_id": self._client_id, "grant_type": "refresh_token", "refresh_token": refresh_token}
        try:
            with trio.fail_after(REFRESH_TIMEOUT):
                async with httpx.AsyncClient() as client:
                    response = await client.post(self._token_url, json=body)
        except (trio.TooSlowError, httpx.HTTPError) as exc:
            raise AuthenticationError(
                f"refreshing the ChatGPT token at {self._token_url} failed: {type(exc).__name__}; check the network",
                error_class="auth_refresh", retryable=True,
            ) from exc
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        error = answer.get("error") if isinstance(answer, dict) else None
        code = error.get("code") if isinstance(error, dict) else error if isinstance(error, str) else None
        if response.status_code == 401 or code in _REFUSED_CODES:
            raise AuthenticationError(
                f"the ChatGPT login in {self.path} is no longer valid ({code or 'HTTP 401'}); run `codex login` again",
                error_class="auth_refresh", status=response.status_code, code=code if isinstance(code, str) else None,
            )
        if response.status_code // 100 != 2 or not isinstance(answer, dict) or not answer.get("access_token"):
            raise AuthenticationError(
                f"refreshing the ChatGPT token at {self._token_url} failed with HTTP {response.status_code}",
                error_class="auth_refresh", status=response.status_code, retryable=response.status_code >= 500,
            )
        return answer


def _account(tokens: dict[str, Any]) -> str | None:
    account = tokens.get("account_id")
    return account if isinstance(account, str) and account else None


def _wall_now() -> float:
    # Token expiry is wall-clock time (a JWT ``exp``), not Trio's clock.
    return datetime.datetime.now(datetime.UTC).timestamp()


def from_codex_home(codex_home: str | Path | None = None, *, token_url: str = TOKEN_URL) -> str | ChatGptAuth:
    """The credential of an existing Codex login, for ``AgentConfig(auth=...)``: the API
    key in API-key mode, else ``ChatGptAuth`` over the file's tokens. ``ConfigError``
    when the file is missing or malformed (never a silent fallback)."""
    path = codex_auth_path(codex_home)
    data = _read(path)
    key = data.get("OPENAI_API_KEY")
    if data.get("auth_mode") in ("apikey", "api_key") or (isinstance(key, str) and key and not data.get("tokens")):
        if not isinstance(key, str) or not key:
            raise ConfigError(f"the Codex login {path} is in API-key mode but holds no OPENAI_API_KEY")
        return key
    source = CodexAuthFile(path, token_url=token_url)
    source.validate()
    return ChatGptAuth(source)
