"""What several payloads share: JSON values, the enumerated strings, token counts.

No ``from __future__ import annotations`` in the payload modules: Python 3.11 reads
``NotRequired`` from evaluated annotations only (a string annotation would count as
required in ``__required_keys__``), and the runtime shape check reads the same
declarations the type checkers do.
"""

from typing import Literal, TypeAlias, TypedDict, Union

__all__ = [
    "ApiPhase",
    "CompactionMode",
    "ConnectionPurpose",
    "Effort",
    "FailurePhase",
    "JsonObject",
    "JsonValue",
    "TokenCounts",
    "ToolStatus",
    "TransportName",
]

# A union object from ``typing`` (not ``X | Y``) so that the public alias can report
# ``trio_agent`` as its module like every other exported name; ``list``/``dict`` rather
# than ``Sequence``/``Mapping`` because ``str`` is a ``Sequence`` and a checker would fold
# it (and every other string) into the array arm.
JsonValue: TypeAlias = Union[str, int, float, bool, list["JsonValue"], dict[str, "JsonValue"], None]  # noqa: UP007
JsonValue.__module__ = __name__  # type: ignore[misc]  # typing's aliases allow dunders
JsonObject: TypeAlias = dict[str, JsonValue]

TransportName: TypeAlias = Literal["responses_websocket_v2", "responses_https_sse"]
Effort: TypeAlias = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
ApiPhase: TypeAlias = Literal["warmup", "generation", "compaction"]
CompactionMode: TypeAlias = Literal["remote", "local"]
FailurePhase: TypeAlias = Literal["connect", "send", "receive", "idle", "api", "protocol"]
ConnectionPurpose: TypeAlias = Literal["initial", "reconnect", "warmup_fallback"]
ToolStatus: TypeAlias = Literal["completed", "failed", "cancelled"]


class TokenCounts(TypedDict):
    """Token usage summed over a turn's responses, from the API's ``usage`` objects
    (absent or null counts count as 0)."""

    input_tokens: int
    """Input tokens, cached ones included."""
    cached_input_tokens: int
    """Input tokens read from the prompt cache (``input_tokens_details.cached_tokens``)."""
    cache_write_input_tokens: int
    """Input tokens written to the prompt cache (``input_tokens_details.cache_write_tokens``)."""
    output_tokens: int
    """Output tokens, reasoning included."""
    reasoning_output_tokens: int
    """Reasoning tokens (``output_tokens_details.reasoning_tokens``)."""
    total_tokens: int
    """Input plus output tokens, as the API reports them."""
