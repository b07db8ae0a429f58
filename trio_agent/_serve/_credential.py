"""The server's credential (``Account``): the one ``trio-agent serve`` started with, or
an API key a client gave with ``account/login/start`` (``_account`` has the methods and
the whole story). Kept apart from the methods so that what they take of the server
(``_context.ServerContext``) can name it."""

from __future__ import annotations

from typing import Any

from .._config import ChatGptAuth

__all__ = ["LOCAL_PROVIDER", "Account"]

Json = dict[str, Any]
LOCAL_PROVIDER = "trio-agent-local"


class Account:
    """The server's credential: the one it started with, or a key a client gave."""

    def __init__(self, auth: str | ChatGptAuth, model_provider: str) -> None:
        self._started_with = auth
        self.local = model_provider == LOCAL_PROVIDER
        self.given_key: str | None = None

    @property
    def auth(self) -> str | ChatGptAuth:
        """What new threads authenticate with."""
        return self.given_key if self.given_key is not None else self._started_with

    def read(self) -> Json:
        """The ``GetAccountResponse``."""
        if self.local and self.given_key is None:
            return {"account": None, "requiresOpenaiAuth": False}
        if isinstance(self.auth, ChatGptAuth):
            account: Json = {"type": "chatgpt", "email": None, "planType": "unknown"}
        else:
            account = {"type": "apiKey"}
        return {"account": account, "requiresOpenaiAuth": True}

    def auth_mode(self) -> str | None:
        """``AuthMode`` of ``account/updated``."""
        if self.local and self.given_key is None:
            return None
        return "chatgpt" if isinstance(self.auth, ChatGptAuth) else "apikey"
