"""``PromptSettings``: the model, thinking and fast mode a turn accepted *now* gets.

``Agent.set_model``/``set_thinking``/``set_fast_mode`` change them for later prompts; a
turn keeps the ``RequestSettings`` it was accepted with, and children start from the
current ones (``_children``). Written only by the agent's setters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._config import AgentConfig, Thinking
from ..._wire.request import RequestSettings

if TYPE_CHECKING:
    from ..._wire.output_schema import OutputSchemaLike

__all__ = ["PromptSettings"]


class PromptSettings:
    """The current per-prompt settings of one agent and the frozen value they make."""

    def __init__(self, config: AgentConfig) -> None:
        self._config = config
        self.model = config.model
        self.thinking: Thinking = config.thinking
        self.fast_mode = config.fast_mode
        self._cache: RequestSettings | None = None  # see request
        self._cache_thinking = self.thinking  # the Thinking it was made with (a member: compared by identity)

    def request(self, output_schema: OutputSchemaLike | None = None) -> RequestSettings:
        """The settings of a turn accepted now (with its own output schema, if any)."""
        # Frozen, so one value serves every turn until the model, thinking or fast mode
        # changes; a turn's output schema is its own copy of it.
        # ``Thinking`` by identity: an enum's ``value`` is a property, read only for a new value.
        cached = self._cache
        if cached is None or cached.model != self.model or self._cache_thinking is not self.thinking \
                or cached.fast_mode != self.fast_mode:
            config = self._config
            self._cache_thinking = self.thinking
            cached = self._cache = RequestSettings(
                model=self.model, effort=self.thinking.value, fast_mode=self.fast_mode, store=config.store,
                prompt_cache_key=config.cache_key, session_id=config.session_id,
            )
        if output_schema is None:
            return cached
        from ..._wire.output_schema import output_schema_of  # the first structured turn loads it

        return cached.with_output_schema(output_schema_of(output_schema))
