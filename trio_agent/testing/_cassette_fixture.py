"""``CassetteFixture``: what the pytest plugin's ``cassette`` fixture hands a test.

Theory of operation: a test wraps each agent session it runs in ``async with
cassette.use(config) as config:``. Whether that session records or replays follows
the record mode (vcrpy's names and meanings, at the grain of a session -- one
cassette file per session, as a cassette is one ordered stream of a session, not a
set of independent request/response pairs):

- ``none``: replay; a session without a cassette fails the test (nothing records);
- ``once``: a test with no cassette records all its sessions; a test that has one
  replays them, and a session beyond those recorded fails the test;
- ``new_episodes``: a session whose cassette exists replays, one without records;
- ``all``: every session records (its cassette is written again).

Recording is ``AgentConfig(record=path)`` on the test's config, which talks to
whatever server it names; when the session's block ends, ``before_record`` (if set)
is applied to every observation line and the file is written again without the
lines it dropped. Replaying starts a ``ReplayServer`` (loopback) in the block's own
nursery and points the config at it (``replay_config``); the test gives its prompts
itself. When the block ends, the server's first mismatch -- or a recorded
observation that never happened -- is raised as ``ReplayMismatch`` (an
``AssertionError``): the test fails with the diff.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    import trio_agent as ta

    from ._replay_match import ReplayMatch, RequestMatcher

__all__ = ["RECORD_MODES", "BeforeRecord", "CassetteFixture"]

RECORD_MODES = ("once", "new_episodes", "none", "all")
SETTLE_GRACE = 5.0  # after the block: the agent's last closes reach the server

#: Called with each observation line as a dict (``t``, ``kind``, its fields) before a
#: recorded cassette is kept; returns the line to write (changed or not) or None to drop it.
BeforeRecord = Callable[[dict[str, Any]], "dict[str, Any] | None"]


class CassetteFixture:
    """The cassettes of one test (see the module docstring): ``use(config)`` per session.

    ``path``: the first session's cassette (the next ones add ``-2``, ``-3``, ... to
    the name); ``record_mode``; ``recording``: whether the next session records."""

    def __init__(
        self, path: Path, *, record_mode: str = "none", before_record: BeforeRecord | None = None,
        match: ReplayMatch | RequestMatcher | Sequence[RequestMatcher] | None = None,
    ) -> None:
        if record_mode not in RECORD_MODES:
            raise ValueError(f"record_mode must be one of {', '.join(RECORD_MODES)}, got {record_mode!r}")
        self.path = path
        self.record_mode = record_mode
        self.before_record = before_record
        self.match = match
        self._sessions = 0
        self._had_cassette = path.exists()  # ``once``: a test that has one never records

    def session_path(self, index: int) -> Path:
        """The cassette of the test's ``index``-th session (1-based)."""
        if index == 1:
            return self.path
        return self.path.with_name(f"{self.path.stem}-{index}{self.path.suffix}")

    @property
    def recording(self) -> bool:
        """Whether the next ``use()`` records (else it replays)."""
        return self._records(self.session_path(self._sessions + 1))

    def _records(self, path: Path) -> bool:
        mode = self.record_mode
        if mode == "all":
            return True
        if mode == "new_episodes":
            return not path.exists()
        if mode == "once":
            return not self._had_cassette
        return False

    @contextlib.asynccontextmanager
    async def use(self, config: ta.AgentConfig) -> AsyncIterator[ta.AgentConfig]:
        """The config of one session: ``config`` recording into its cassette, or pointed
        at a server replaying it. Fails the test (``ReplayMismatch``) when the replayed
        agent did not behave as recorded, and (``CassetteError``) when the session has no
        cassette and the record mode does not record it."""
        self._sessions += 1
        path = self.session_path(self._sessions)
        if self._records(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            import attrs

            yield attrs.evolve(config, record=path)
            if self.before_record is not None and path.exists():
                _rewrite(path, self.before_record)
            return
        if not path.exists():
            from .._cassette.format import CassetteError

            raise CassetteError(f"no cassette {str(path)!r} for session {self._sessions} of this test, and record "
                                f"mode {self.record_mode!r} does not record it; run pytest with --record-mode=once "
                                "(a test without cassettes) or --record-mode=new_episodes to record it")
        async with self._replaying(path, config) as replayed:
            yield replayed

    @contextlib.asynccontextmanager
    async def _replaying(self, path: Path, config: ta.AgentConfig) -> AsyncIterator[ta.AgentConfig]:
        from ._replay import replay_config
        from ._replay_match import ReplayMatch, ReplayMismatch
        from ._replay_server import ReplayServer

        server = ReplayServer(path, match=self.match if self.match is not None else ReplayMatch.INPUT,
                              workspace=config.resolved_workspace())
        body = trio.CancelScope()

        async def serve(*, task_status: trio.TaskStatus[ReplayServer] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                await server.serve(task_status=task_status)
            except ReplayMismatch:
                body.cancel()  # the test's block stops at the first difference

        async with trio.open_nursery() as nursery:
            await nursery.start(serve)
            with body:
                yield replay_config(server.cassette, server, config=config)
            if server.mismatch is None:
                with trio.move_on_after(SETTLE_GRACE):
                    await server.wait_done()
            nursery.cancel_scope.cancel()
        if server.mismatch is not None:
            raise server.mismatch
        unreached = server.unreached()  # inputs and turn ends are the test's own (not gated)
        if unreached:
            first = unreached[0]
            raise ReplayMismatch(
                f"replay mismatch at cassette line {first.line} of {path}: the test's session stopped before the "
                f"recording did; {len(unreached)} recorded observation(s) never happened, the first a {first.kind}",
                line=first.line,
            )


def _rewrite(path: Path, before_record: BeforeRecord) -> None:
    """Apply ``before_record`` to every observation line of ``path`` (header and end kept)."""
    from .._jsontext import dumps

    lines = path.read_text(encoding="utf-8").split("\n")
    kept: list[str] = []
    for number, line in enumerate(lines):
        if not line:
            continue
        value = json.loads(line)
        if number == 0 or value.get("kind") == "end":
            kept.append(line)
            continue
        changed = before_record(value)
        if changed is not None:
            kept.append(dumps(changed))
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text("\n".join(kept) + "\n", encoding="utf-8")
    os.replace(temporary, path)
