"""Keep credentials out of error messages, whatever the server echoes back.

A server may quote the credential it rejected in its error text (an HTTP body, an
``error`` frame). The model client registers every credential it sends (the API key,
each ChatGPT token) with a ``Redactor``; before a ``ResponsesError`` becomes a
``model.*`` event or a ``TurnFailed``, ``scrub`` replaces each of them in the error's
message with ``<redacted>``. Raw ``api.event`` frames are reported as received.
"""

from __future__ import annotations

import collections

from .._errors import ResponsesError

__all__ = ["REDACTED", "Redactor"]

REDACTED = "<redacted>"
_MIN_SECRET = 8  # shorter strings would redact ordinary words


class Redactor:
    def __init__(self) -> None:
        self._secrets: collections.deque[str] = collections.deque(maxlen=8)

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= _MIN_SECRET and secret not in self._secrets:
            self._secrets.append(secret)

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def scrub(self, exc: ResponsesError) -> ResponsesError:
        """``exc`` with every registered credential removed from its message (in place)."""
        message = self.text(exc.message)
        if message != exc.message:
            exc.message = message
            exc.args = (message, *exc.args[1:])
        return exc
