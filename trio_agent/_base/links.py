"""What the configuration layer needs from the layers above it, as one protocol the
package face fills in (dependency inversion; docs/architecture.md, "Layers").

``AgentConfig`` checks that ``rollout=`` is a ``RolloutConfig`` and ``tracing=`` a
``Tracing``, checks a resumed snapshot against the default tools' definitions, and
``ChatGptAuth.from_codex_home`` reads a Codex login. Those live in higher layers, so
this layer does not import them: ``trio_agent/_wiring.py`` installs a ``Links`` whose
methods import them on first use, and ``trio_agent/__init__.py`` imports that module.
Every import of a ``trio_agent`` module runs the package's ``__init__`` first, so the
links are in place before any configuration can be built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

__all__ = ["Links", "install", "linked"]


class Links(Protocol):
    """The higher parts the configuration layer calls, each imported only when called."""

    def rollout_type(self) -> type[Any]:
        """``RolloutConfig`` (``_rollout``)."""
        ...

    def tracing_type(self) -> type[Any]:
        """``Tracing`` (``_tracing/_settings.py``; importing it imports no OpenTelemetry)."""
        ...

    def default_tool_definitions(self) -> list[dict[str, Any]]:
        """The definitions of ``Tools.default()`` (``_tools``)."""
        ...

    def from_codex_home(self, codex_home: str | Path | None, token_url: str | None) -> object:
        """A Codex login's credential, an API key or a ``ChatGptAuth`` (``_codex_login.py``;
        ``token_url=None``: Codex's own). Typed ``object`` so that this module need not
        import ``auth.py``, which imports it; ``ChatGptAuth.from_codex_home`` checks it."""
        ...


_installed: list[Links] = []


def install(provider: Links) -> None:
    """Make ``provider`` the links (the package face calls this once, at import)."""
    _installed[:] = [provider]


def linked() -> Links:
    """The installed links; ``RuntimeError`` when the package face has not run."""
    if not _installed:
        raise RuntimeError("trio_agent's configuration layer is not linked: import trio_agent first")
    return _installed[0]
