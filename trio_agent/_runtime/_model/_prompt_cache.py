"""Single-flight shared-prefix warmups (``AgentConfig(shared_prompt_cache=True)``, SPEC sec. 3).

Agents in one Trio run that share a fingerprint -- model, prompt cache key and the
exact request prefix -- warm the server's prompt cache once: the first does a real
warmup; the others wait for it (never a second warmup in flight) and then report
``model.warmup.completed`` with ``source: "shared_prefix"`` and send a full first
request on their own connection. The registry lives in a ``trio.lowlevel.RunVar``, so
it is scoped to the Trio run, not to the process's import state. A failed warmup is
forgotten, so the next agent tries again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import trio

__all__ = ["SharedWarmups", "fingerprint"]

_REGISTRY: trio.lowlevel.RunVar[dict[str, SharedWarmups]] = trio.lowlevel.RunVar("trio_agent_shared_warmups")


def fingerprint(model: str, cache_key: str, prefix: Sequence[dict[str, Any]]) -> str:
    material = json.dumps([model, cache_key, list(prefix)], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(material.encode()).hexdigest()


class SharedWarmups:
    """One fingerprint's state: in flight (an event to wait on) or done."""

    def __init__(self) -> None:
        self.finished = trio.Event()
        self.succeeded = False

    @staticmethod
    async def claim(key: str) -> SharedWarmups | None:
        """``None`` if the caller must warm up itself (and then call ``record``/``forget``);
        otherwise an entry whose warmup already succeeded."""
        try:
            registry = _REGISTRY.get()
        except LookupError:
            registry = {}
            _REGISTRY.set(registry)
        while True:
            entry = registry.get(key)
            if entry is None:
                registry[key] = SharedWarmups()
                return None
            await entry.finished.wait()
            if entry.succeeded:
                return entry
            # The leader failed and forgot the entry: compete again.

    @staticmethod
    def record(key: str, *, succeeded: bool) -> None:
        registry = _REGISTRY.get()
        entry = registry[key]
        entry.succeeded = succeeded
        if not succeeded:
            del registry[key]
        entry.finished.set()
