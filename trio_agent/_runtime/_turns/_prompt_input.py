"""What ``prompt``, ``submit`` and ``start_if_idle`` take, checked: text, a ``Prompt``, raw items."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._errors import InvalidPrompt
from . import _pending_input
from ._turn import Prompt

__all__ = ["checked_prompt", "turn_input"]


def turn_input(given: str | Prompt | Sequence[dict[str, Any]]) -> _pending_input.TurnInput:
    """A prompt, or a list of raw Responses items (``submit``, ``start_if_idle``)."""
    if isinstance(given, str | Prompt):
        return checked_prompt(given)
    if isinstance(given, list | tuple):
        return _pending_input.checked_items(given)
    raise InvalidPrompt(
        f"expected text, a ta.Prompt or a list of Responses items, got {type(given).__name__}"
    )


def checked_prompt(prompt: str | Prompt) -> Prompt:
    """A ``Prompt`` with non-empty text (``prompt``)."""
    if isinstance(prompt, str):
        prompt = Prompt(prompt)
    if not isinstance(prompt, Prompt):
        raise InvalidPrompt(
            f"expected text or a ta.Prompt, got {type(prompt).__name__}; raw Responses items go to "
            "submit(), start_if_idle() or inject()"
        )
    if not prompt.text.strip():
        raise InvalidPrompt("a prompt needs non-empty text")
    return prompt
