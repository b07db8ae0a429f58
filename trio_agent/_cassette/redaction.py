"""What a cassette keeps secret, shared by the recorder and the replay's diff.

Theory of operation: a header named like a credential (``Authorization``, cookies,
``ChatGPT-Account-ID``, any name containing ``key``, ``token``, ``secret`` or
``password``) is written as ``<redacted>`` and its value remembered; so are the values
of the process's environment variables named that way (a tool that prints
``$OPENAI_API_KEY`` must not put it in the file). Every recorded string is then
scrubbed of the remembered values. A replay applies the same rules to what the agent
sends now -- the credentials on its own requests and the environment's -- on both
sides of a comparison, so a diff shows ``<redacted>`` where the cassette does, never
the secret, and a session whose tool output held a credential still replays as OK.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .._runtime._secrets import REDACTED

__all__ = ["REDACTED", "SecretValues", "secret_name"]

_SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "chatgpt-account-id",
    "openai-organization", "openai-project",
})
_SECRET_WORDS = ("key", "token", "secret", "password")
_MIN_SECRET = 8  # shorter values would redact ordinary words


def secret_name(name: str) -> bool:
    """Whether a header (or environment variable) of this name holds a credential."""
    lowered = name.lower()
    return lowered in _SECRET_HEADERS or any(word in lowered for word in _SECRET_WORDS)


class SecretValues:
    """The credential values seen so far; ``scrub`` replaces each by ``<redacted>``."""

    def __init__(self, *, environment: bool = True) -> None:
        self._values: list[str] = []
        if environment:
            for name, value in os.environ.items():
                if secret_name(name):
                    self.add(value)

    def add(self, value: str) -> None:
        """Remember ``value`` (and, for ``Bearer X``, ``X``)."""
        for part in (value, value.removeprefix("Bearer ").strip()):
            if len(part) >= _MIN_SECRET and part not in self._values:
                self._values.append(part)
        self._values.sort(key=len, reverse=True)  # a longer secret first: its prefix may be another

    def add_headers(self, headers: Iterable[tuple[str, str]]) -> None:
        for name, value in headers:
            if secret_name(name):
                self.add(value)

    def scrub(self, text: str) -> str:
        for secret in self._values:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def __len__(self) -> int:
        return len(self._values)
