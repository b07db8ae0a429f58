"""The package face's wiring: what the configuration layer needs from the layers above
it (``_base/links.py``), installed when ``trio_agent`` is imported.

Each method imports its module when first called, so ``import trio_agent`` loads none
of them (tests/test_lean_import.py): an agent without a rollout, tracing or a resumed
session never imports their modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._base import links

if TYPE_CHECKING:
    from ._base.auth import ChatGptAuth

__all__: list[str] = []


class _Face:
    """``links.Links`` over this package's own modules."""

    def rollout_type(self) -> type[Any]:
        from ._rollout import RolloutConfig

        return RolloutConfig

    def tracing_type(self) -> type[Any]:
        from ._tracing._settings import Tracing  # no OpenTelemetry import: only Tracing() itself does that

        return Tracing

    def default_tool_definitions(self) -> list[dict[str, Any]]:
        from ._tools import Tools

        return Tools.default().definitions()

    def from_codex_home(self, codex_home: str | Path | None, token_url: str | None) -> str | ChatGptAuth:
        from ._codex_login import TOKEN_URL, from_codex_home

        return from_codex_home(codex_home, token_url=token_url or TOKEN_URL)


links.install(_Face())
