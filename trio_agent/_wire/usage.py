"""Token usage: the API's ``usage`` object normalised and summed (pure).

``usage: null`` and null token details are accepted and count as 0
(``completed_response_accepts_null_usage*``).
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["TokenUsage"]


@attrs.frozen
class TokenUsage:
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def from_api(cls, raw: dict[str, Any] | None) -> TokenUsage:
        if not isinstance(raw, dict):
            return cls()
        # One function, no helper per field (every response's usage goes through here).
        inputs = raw.get("input_tokens_details")
        if not isinstance(inputs, dict):
            inputs = {}
        outputs = raw.get("output_tokens_details")
        if not isinstance(outputs, dict):
            outputs = {}
        counts: list[int] = []  # in field order; anything but an int (a bool is not one) counts as 0
        for value in (raw.get("input_tokens"), inputs.get("cached_tokens"), inputs.get("cache_write_tokens"),
                      raw.get("output_tokens"), outputs.get("reasoning_tokens"), raw.get("total_tokens")):
            counts.append(value if isinstance(value, int) and not isinstance(value, bool) else 0)
        return cls(*counts)

    # Field by field rather than through attrs.astuple/asdict: these run for every
    # response and every terminal payload.
    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_input_tokens + other.cache_write_input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_output_tokens + other.reasoning_output_tokens,
            self.total_tokens + other.total_tokens,
        )

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens - other.input_tokens,
            self.cached_input_tokens - other.cached_input_tokens,
            self.cache_write_input_tokens - other.cache_write_input_tokens,
            self.output_tokens - other.output_tokens,
            self.reasoning_output_tokens - other.reasoning_output_tokens,
            self.total_tokens - other.total_tokens,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cache_write_input_tokens": self.cache_write_input_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_output_tokens": self.reasoning_output_tokens,
            "total_tokens": self.total_tokens,
        }
