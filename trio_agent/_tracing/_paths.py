"""Which warmup path a model call took: the ``trio_agent.warmup.path`` attribute.

The paths are the ones ``trio-agent bench`` compares (SPEC sec. 9), named by what the
runtime observed on the socket the call's answering attempt used:

- ``startup_prewarm``: the first call on a socket whose startup warmup succeeded;
- ``shared_prefix_prewarm``: the first call after another agent warmed the shared
  prefix (``shared_prompt_cache=True``; no warmup of its own);
- ``cold_connect``: the first call on the agent's first socket with no warmup (a
  fork, a resumed session, ``open_agent(config, warmup=False)``: ``trio-agent run``);
- ``warmup_fallback``: the first call on the socket opened after the warmup failed;
- ``reconnect``: the first call on a socket opened again (after a drop, a retry, a
  cancelled turn);
- ``warm_socket``: any later call on a socket that already answered one;
- ``https``: the HTTPS transport (no socket of its own).
"""

from __future__ import annotations

__all__ = ["WarmupPaths"]


class WarmupPaths:
    def __init__(self, *, https: bool) -> None:
        self._https = https
        self._purpose: dict[int, str] = {}  # connection generation -> why it was opened
        self._prewarmed: set[int] = set()
        self._served: set[int] = set()
        self._shared_prefix = False

    def connected(self, generation: int, purpose: str) -> None:
        self._purpose[generation] = purpose

    def warmed(self, generation: int | None, *, shared: bool) -> None:
        if shared:
            self._shared_prefix = True
        elif generation is not None:
            self._prewarmed.add(generation)

    def path_of(self, generation: int | None) -> str:
        """The path of a generation call answered on ``generation`` (counts it as served)."""
        if self._https or generation is None:
            return "https"
        if generation in self._served:
            return "warm_socket"
        self._served.add(generation)
        if generation in self._prewarmed:
            return "startup_prewarm"
        purpose = self._purpose.get(generation, "initial")
        if purpose in ("warmup_fallback", "reconnect"):
            return purpose
        return "shared_prefix_prewarm" if self._shared_prefix else "cold_connect"
