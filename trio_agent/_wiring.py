"""The package face's wiring, installed when ``trio_agent`` is imported: what the
configuration layer needs from the layers above it (``_base/links.py``), and the
add-ons an agent's config can attach through the observer seam
(``_runtime/_observers.py``: tracing for ``tracing=``, the cassette recorder for
``record=``), so that the runtime never imports them.

Each method imports its module when first called, so ``import trio_agent`` loads none
of them (tests/test_lean_import.py): an agent without a rollout, tracing, a cassette or
a resumed session never imports their modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._base import links
from ._runtime import _observers

if TYPE_CHECKING:
    from ._base.auth import ChatGptAuth
    from ._config import AgentConfig

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


class _Tracing:
    """The tracing add-on: a tree whose root has ``tracing=`` is traced (``_tracing``)."""

    def open(self, config: AgentConfig) -> _observers.Attachment | None:
        if config.tracing is None:
            return None
        from ._tracing import TracingTree
        from ._tracing._settings import Tracing

        tracing = config.tracing
        assert isinstance(tracing, Tracing)  # AgentConfig checks it; its field names a protocol
        return TracingTree(tracing)


class _Recording:
    """The cassette add-on: a tree whose root has ``record=`` records (``_cassette``)."""

    def open(self, config: AgentConfig) -> _observers.Attachment | None:
        if config.record is None:
            return None
        from ._cassette.recorder import open_cassette

        return open_cassette(config)


links.install(_Face())
_observers.install(_Tracing())  # the order in which they see each turn's notices
_observers.install(_Recording())
