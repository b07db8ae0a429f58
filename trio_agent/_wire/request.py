"""Request builders for ``response.create`` (pure).

One body shape for warmups, incremental and full-replay requests (SPEC sec. 2,
nanocodex sec. 4.2). Top-level ``tools``, ``instructions`` and
``context_management`` are never sent: tools travel in-band as the
``additional_tools`` input item ("Responses Lite").

Outgoing items are copies with server ids stripped: an id is kept only when it is
"prefixed" (``<non-empty>_<non-empty>``, e.g. ``ctco_...``, ``rs_...``), and
``additional_tools`` never carries one (``additional_tools_never_carry_client_defined_ids``).
History itself is never mutated.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._record import Record

if TYPE_CHECKING:
    from .output_schema import OutputSchema

__all__ = [
    "RequestSettings",
    "build_response_create",
    "is_prefixed_id",
    "strip_prefix_ids",
    "wire_item",
]

TURN_STATE_KEY = "x-codex-turn-state"
LITE_KEY = "ws_request_header_x_openai_internal_codex_responses_lite"


class RequestSettings(Record):
    """The per-request policy captured for a turn (or the warmup). ``output_schema``
    is the turn's structured output (``text.format``), sent with its generation
    requests only (``without_output_schema`` for the others)."""

    __slots__ = (  # noqa: RUF023  # field order
        "model", "effort", "fast_mode", "store", "prompt_cache_key", "session_id", "output_schema",
    )
    __match_args__ = ("model", "effort", "fast_mode", "store", "prompt_cache_key", "session_id", "output_schema")

    def __init__(self, model: str, effort: str, fast_mode: bool, store: bool, prompt_cache_key: str,
                 session_id: str, output_schema: OutputSchema | None = None) -> None:
        self.model = model
        self.effort = effort
        self.fast_mode = fast_mode
        self.store = store
        self.prompt_cache_key = prompt_cache_key
        self.session_id = session_id
        self.output_schema = output_schema

    def with_output_schema(self, output_schema: OutputSchema | None) -> RequestSettings:
        """These settings with ``output_schema`` (``self`` when it is already the one)."""
        if output_schema == self.output_schema:
            return self
        return RequestSettings(self.model, self.effort, self.fast_mode, self.store, self.prompt_cache_key,
                               self.session_id, output_schema)

    def without_output_schema(self) -> RequestSettings:
        return self.with_output_schema(None)


def is_prefixed_id(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    head, sep, tail = value.partition("_")
    return bool(sep and head and tail)


def wire_item(item: dict[str, Any]) -> dict[str, Any]:
    """The outgoing copy of a history item (ids stripped as described above)."""
    if "id" not in item:
        return item
    if item.get("type") == "additional_tools" or not is_prefixed_id(item["id"]):
        return {key: value for key, value in item.items() if key != "id"}
    return item


def strip_prefix_ids(prefix: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop any id from ``additional_tools`` items of a request prefix (legacy snapshots)."""
    return [
        {k: v for k, v in item.items() if k != "id"}
        if item.get("type") == "additional_tools"
        else item
        for item in prefix
    ]


def build_response_create(
    settings: RequestSettings,
    input_items: Iterable[dict[str, Any]],
    *,
    previous_response_id: str | None = None,
    generate: bool | None = None,
    websocket: bool = True,
    turn_state: str | None = None,
) -> dict[str, Any]:
    """The body of one request; WebSocket bodies start with ``type: response.create``."""
    body: dict[str, Any] = {}
    if websocket:
        body["type"] = "response.create"
    body["model"] = settings.model
    if previous_response_id is not None:
        body["previous_response_id"] = previous_response_id
    # A full replay's input (``_session.history.Replay``) knows its request form and text.
    wire = getattr(input_items, "wire", None)
    body["input"] = wire() if wire is not None else list(map(wire_item, input_items))
    body["tool_choice"] = "auto"
    body["parallel_tool_calls"] = False
    body["reasoning"] = {"effort": settings.effort, "context": "all_turns"}
    body["store"] = settings.store
    body["stream"] = True
    body["include"] = ["reasoning.encrypted_content"]
    body["prompt_cache_key"] = settings.prompt_cache_key
    body["text"] = (
        {"verbosity": "low"} if settings.output_schema is None
        else {"verbosity": "low", "format": settings.output_schema.text_format()}
    )
    if settings.fast_mode:
        body["service_tier"] = "priority"
    if generate is not None:
        body["generate"] = generate
    metadata: dict[str, str] = {
        "session_id": settings.session_id,
        "thread_id": settings.session_id,
    }
    if websocket:
        metadata[LITE_KEY] = "true"
        if turn_state is not None:
            metadata[TURN_STATE_KEY] = turn_state
    body["client_metadata"] = metadata
    return body
