"""The two ways a built-in or typed tool says "this call failed" (answered, never fatal)."""

from __future__ import annotations

__all__ = ["InvalidToolArguments", "NestedToolError"]


class NestedToolError(Exception):
    """A tool call failed with ``message``: the model gets a failed result (a nested
    call's promise is rejected with it); the agent carries on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidToolArguments(NestedToolError):
    """The arguments did not match the tool's schema; ``message`` names each field and
    what is wrong with it. Raised before the tool's own code runs."""
