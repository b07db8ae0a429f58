"""Where an agent comes from: its ``Origin``, and the children it makes.

An ``Origin`` is everything ``open_agent`` needs besides the nursery: the config, the
conversation it starts from (a fork's boundary; a resumed session's snapshot, see
``resume_seed``), the parent's session id and mail address, the lineage, its mail
path and the agent tree's add-ons (``_observers``). ``ChildFactory`` makes the origins of one agent's
children -- ``fork`` (from the latest boundary), ``fork_from`` (from a turn's result),
``spawn`` (clean) and ``reopen`` (a suspended worker back from its snapshot) -- and
hands each to the opener it was given (``open_agent``'s own, so this module never
imports ``_agent``). Children start with the parent's current model, thinking and fast
mode (``PromptSettings``), its workspace, and a new session id.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from .._config import AgentConfig
from .._errors import CheckpointLineageMismatch, ForkBeforeCompletedTurn, InvalidPrompt
from .._ids import uuid7_text
from .._session.context import DEFAULT_INSTRUCTIONS
from .._session.conversation import ConversationSnapshot
from .._session.history import History

if TYPE_CHECKING:
    from .._config import Thinking
    from .._session.snapshot import SessionSnapshot
    from .._transport._early_dial import EarlyDial
    from ._calls._collaboration import MailAddress
    from ._model._connections import EarlyLink
    from ._observers import Attachment
    from ._turns._prompt_settings import PromptSettings
    from ._turns._runner import ForkPoint
    from ._turns._turn import TurnResult

__all__ = ["ChildFactory", "Origin", "resume_seed"]

A = TypeVar("A")
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@attrs.frozen
class Origin:
    """What an agent is opened from (``open_agent(config)``: ``Origin(config)``)."""

    config: AgentConfig
    seed: ConversationSnapshot | None = None  # a fork's boundary (chained on its response)
    parent_id: str | None = None  # the session id of the agent it was spawned or forked from
    lineage_id: str | None = None  # the root session of its lineage (None: its own)
    path: str = "/root"  # its mail path
    parent: MailAddress | None = None  # the parent's mail address
    # The agent tree's add-ons (tracing, a cassette: ``_observers``), shared; None: a root opens them.
    attachments: tuple[Attachment, ...] | None = None
    # ``open_agent(config, warmup=False)``: a root whose first prompt is in hand sends no
    # warmup request (it would only delay that prompt by a round trip); children warm up.
    warmup: bool = True
    # A root's first connection, already on its way (``_lifecycle._early_start``).
    early: EarlyLink | EarlyDial | None = None


def resume_seed(config: AgentConfig, prefix: tuple[dict[str, Any], ...]) -> tuple[ConversationSnapshot, str]:
    """A resumed session's start (``config.resume``, checked against this agent's
    request prefix) and the lineage it belongs to: unchained, so the first request is a
    full replay (SPEC sec. 8)."""
    from .._session.snapshot import check_prefix  # loaded: config.resume is a snapshot

    snapshot = config.resume
    assert snapshot is not None
    check_prefix(
        snapshot, request_prefix=list(prefix), instructions=config.instructions or DEFAULT_INSTRUCTIONS,
    )
    return ConversationSnapshot(prefix, History(snapshot.history), None, 0), snapshot.lineage_id


class ChildFactory(Generic[A]):
    """The children of one agent: their config, path and seed, opened by ``open``."""

    def __init__(
        self, origin: Origin, *, session_id: str, lineage_id: str, workspace: Path, settings: PromptSettings,
        fork_point: ForkPoint, address: MailAddress, opener: Callable[[Origin], AbstractAsyncContextManager[A]],
    ) -> None:
        self._config = origin.config
        self._path = origin.path
        self._attachments = origin.attachments
        self._session_id = session_id
        self._lineage_id = lineage_id
        self._workspace = workspace
        self._settings = settings
        self._fork_point = fork_point
        self._address = address
        self._open = opener
        self._children = 0

    def fork(self) -> AbstractAsyncContextManager[A]:
        point = self._fork_point.latest
        if point is None:
            raise ForkBeforeCompletedTurn(
                "fork() needs a model boundary to branch from: prompt the agent first, or use spawn()"
            )
        return self._child(self._child_path(None, "fork"), keep_lineage=True, seed=point)

    def fork_from(self, result: TurnResult) -> AbstractAsyncContextManager[A]:
        checkpoint = result._checkpoint
        lineage = self._config.cache_key
        if checkpoint is None or result._lineage != lineage:
            raise CheckpointLineageMismatch(
                f"turn {result.turn_id}'s result does not belong to this agent's lineage "
                f"(prompt cache key {lineage!r}); fork from a result of this agent or its forks"
            )
        return self._child(self._child_path(None, "fork"), keep_lineage=True, seed=checkpoint)

    def spawn(self, name: str | None = None) -> AbstractAsyncContextManager[A]:
        return self._child(self._child_path(name, "child"), keep_lineage=False)

    def reopen(self, name: str, session_id: str, snapshot: SessionSnapshot) -> AbstractAsyncContextManager[A]:
        """A suspended worker back from its snapshot: the same name, path and session id
        (so its rollout goes on in the same file), spawned again from this agent."""
        child = self._child(f"{self._path}/{name}", keep_lineage=False)
        # Built now, checked now (attrs.evolve validates the snapshot against the config).
        child.config = attrs.evolve(self._child_config(child), session_id=session_id, resume=snapshot)
        return child

    def _child(self, path: str, *, keep_lineage: bool, seed: ConversationSnapshot | None = None) -> _Child[A]:
        """A fork keeps the lineage (its seed is a boundary of it); a clean child starts its own.

        What the child starts from is fixed now -- its seed, path, and the parent's model,
        thinking and fast mode as they are at this call -- while its config (a new session
        id, the copy of the parent's) is built when the block is entered: ``fork()`` is
        called on the parent's hot path, and the block's opening costs far more anyway."""
        settings = self._settings
        return _Child(self, path, keep_lineage, seed, (settings.model, settings.thinking, settings.fast_mode))

    def _child_path(self, name: str | None, kind: str) -> str:
        self._children += 1
        if name is None:
            name = f"{kind}-{self._children}"
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidPrompt(
                f"a child's name is one path segment of letters, digits, '_' or '-' (1-64), got {name!r}"
            )
        return f"{self._path}/{name}"

    def _origin(self, child: _Child[A]) -> Origin:
        config = child.config or self._child_config(child)
        return Origin(config, seed=child.seed, parent_id=self._session_id,
                      lineage_id=self._lineage_id if child.keep_lineage else None, path=child.path,
                      parent=self._address, attachments=self._attachments)

    def _child_config(self, child: _Child[A]) -> AgentConfig:
        model, thinking, fast_mode = child.settings
        config = self._config
        return config._derive(  # no re-validation: every change is valid by construction
            session_id=uuid7_text(),
            prompt_cache_key=config.cache_key if child.keep_lineage else config.prompt_cache_key,
            model=model,  # the model current at the call, as the thinking (set_model)
            thinking=thinking,
            fast_mode=fast_mode,
            workspace=self._workspace,
            resume=None,
        )


class _Child(AbstractAsyncContextManager[A]):
    """A child's block, its origin built on entry (``ChildFactory._child``); one use."""

    __slots__ = ("_block", "_factory", "config", "keep_lineage", "path", "seed", "settings")

    def __init__(self, factory: ChildFactory[A], path: str, keep_lineage: bool, seed: ConversationSnapshot | None,
                 settings: tuple[str, Thinking, bool]) -> None:
        self._factory = factory
        self.path = path
        self.keep_lineage = keep_lineage
        self.seed = seed
        self.settings = settings  # the parent's model, thinking and fast mode at the call
        self.config: AgentConfig | None = None  # built on entry unless given (reopen)
        self._block: AbstractAsyncContextManager[A] | None = None

    async def __aenter__(self) -> A:
        if self._block is not None:
            raise RuntimeError("a child's block is entered once; call fork() or spawn() again for another")
        factory = self._factory
        self._block = factory._open(factory._origin(self))
        return await self._block.__aenter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        assert self._block is not None
        return await self._block.__aexit__(exc_type, exc, tb)
