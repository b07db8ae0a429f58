"""Compaction requests: remote first, local once this agent's server has declined one.

Theory of operation (SPEC sec. 8; issue 23 item 3). A compaction is one step with one
``model.compaction.started`` and one ending, ``.completed`` or ``.failed`` (a cancelled
turn ends it with no event, like any request). Every agent starts in *remote* mode: the
request is the usual input (chained or replayed in full) plus ``compaction_trigger``,
answered by exactly one ``compaction`` item. A server that offers no remote compaction
*declines* (below); the agent then emits ``model.compaction.fallback``, switches to
*local* mode for the rest of its life and completes the same compaction locally: the
same input plus the summarization prompt, with ``tool_choice: "none"``, whose text
answer is the summary (``_session.summary``). Later compactions go straight to local.
The mode belongs to the agent, not to the session: a resumed agent tries remote again.
An agent speaking ``Profile.GENERIC`` starts local: the trigger is OpenAI's own.

What counts as declining (``declined_output``, ``declined_error``):

- the compaction response completed with output, none of it a ``compaction`` item: the
  server dropped or ignored the trigger and answered the conversation (a message,
  reasoning, a tool call);
- an ``ApiError`` (an ``error`` frame, ``response.failed``, an HTTP error answer; after
  its retries when it is retryable) whose message names ``compaction_trigger`` or says
  compaction is not supported (``compaction`` and ``support`` in it: "unsupported",
  "not supported", "supported values are ...").

Anything else fails the compaction as it always did (history unchanged, the turn
fails): a completed response with no output at all or with several compaction items
(``ProtocolError``), any other error (a quota, an outage, a dropped socket), and, when
local, a summarization response with no text (``ProtocolError``, ``empty_summary``).

The requests' text (``assistant.*``, ``reasoning.*``) is never the agent's answer: the
response feed emits none for the ``compaction`` phase (``_response_feed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ..._errors import ApiError, ProtocolError, ResponsesError
from ..._events import EventKind
from ..._record import Record
from ..._session.compaction import COMPACTION_TRIGGER
from ..._session.summary import summarization_prompt_item, summary_text
from ..._units import ns
from ..._wire.request import RequestSettings
from ..._wire.stream import ResponseOutcome
from ..._wire.usage import TokenUsage

if TYPE_CHECKING:
    from ..._session.history import History
    from ..._session.ledger import TurnLedger
    from ._sampling import Sampler

__all__ = ["Compacted", "Compactor", "declined_error", "declined_output"]

Item = dict[str, Any]
_COMPACTION_TYPES = ("compaction", "compaction_summary")


class Compacted(Record):
    """A finished compaction: ``item`` (remote: the compaction item) or ``summary``
    (local: the summary text), the id of the response that compacted, and the usage of
    every response it took (a declined one included)."""

    __slots__ = ("mode", "response_id", "usage", "item", "summary")  # noqa: RUF023  # field order

    def __init__(self, mode: str, response_id: str, usage: TokenUsage, item: Item | None, summary: str) -> None:
        self.mode = mode
        self.response_id = response_id
        self.usage = usage
        self.item = item
        self.summary = summary

    def install(self, ledger: TurnLedger, *, permissions: Item, context: Item) -> History:
        """Replace the ledger's history with the compacted one; the new history."""
        if self.item is not None:
            return ledger.install_compaction(self.item, permissions=permissions, context=context)
        return ledger.install_summary(self.summary, permissions=permissions, context=context)


def declined_output(outcome: ResponseOutcome) -> str | None:
    """What the server answered instead of a compaction item, when that is a decline
    (output, none of it a compaction item); None otherwise."""
    if not outcome.output or any(item.get("type") in _COMPACTION_TYPES for item in outcome.output):
        return None
    kinds = sorted({str(item.get("type")) for item in outcome.output})
    return f"the compaction request was answered with {', '.join(kinds)} output and no compaction item"


def declined_error(exc: ResponsesError) -> bool:
    """An API error saying the server does not take ``compaction_trigger``."""
    if not isinstance(exc, ApiError):
        return False
    message = str(exc).lower()
    return "compaction_trigger" in message or ("compaction" in message and "support" in message)


class Compactor:
    """One agent's compactions (see the module docstring); ``mode`` is ``"remote"``
    until the server declines, then ``"local"``."""

    def __init__(self, sampler: Sampler) -> None:
        self._sampler = sampler
        self._model = sampler.model
        self._emit = sampler.model.emit
        # ``compaction_trigger`` is OpenAI's: other servers (Profile.GENERIC) compact locally.
        self.mode = "local" if sampler.model.portable else "remote"

    async def compact(
        self, settings: RequestSettings, *, after_call_index: int, turn_id: int, active_tokens: int, limit: int
    ) -> Compacted:
        """Compact once (``model.compaction.*``); ``ResponsesError`` when it failed."""
        self._emit(EventKind.MODEL_COMPACTION_STARTED, {
            "mode": self.mode, "after_model_call_index": after_call_index, "active_context_tokens": active_tokens,
            "auto_compact_token_limit": limit, "previous_response_id": self._model.chain.previous_response_id,
        }, turn_id)
        start = trio.current_time()
        # A compaction's output is its compaction item or summary: the turn's structured
        # output applies to its generations only (output_schema.py).
        settings = settings.without_output_schema()
        try:
            outcome, compacted, attempt = await self._compact(settings, after_call_index, turn_id)
        except ResponsesError as exc:
            self._emit(EventKind.MODEL_COMPACTION_FAILED, {
                "after_model_call_index": after_call_index, "duration_ns": ns(trio.current_time() - start),
                "error": str(exc),
            }, turn_id)
            raise
        self._emit(EventKind.MODEL_COMPACTION_COMPLETED, {
            "mode": compacted.mode, "after_model_call_index": after_call_index, "response_id": outcome.response_id,
            "attempt": attempt, "connection_generation": self._model.generation, "status": outcome.status,
            "duration_ns": ns(trio.current_time() - start), "usage": outcome.usage_raw,
        }, turn_id)
        return compacted

    async def _compact(
        self, settings: RequestSettings, after_call_index: int, turn_id: int
    ) -> tuple[ResponseOutcome, Compacted, int]:
        """The response that compacted, what it gave, and its attempt number."""
        spent = TokenUsage()
        if self.mode == "remote":
            try:
                outcome, attempt = await self._request(settings, after_call_index, turn_id, [COMPACTION_TRIGGER])
            except ApiError as exc:
                if not declined_error(exc):
                    raise
                self._fall_back(after_call_index, turn_id, "compaction_unsupported", None, str(exc))
            else:
                spent = outcome.usage
                items = [item for item in outcome.output if item.get("type") in _COMPACTION_TYPES]
                if len(items) == 1:
                    return outcome, Compacted("remote", outcome.response_id, spent, items[0], ""), attempt
                detail = declined_output(outcome)
                if detail is None:
                    raise ProtocolError(
                        f"remote compaction returned {len(items)} compaction items; expected exactly one",
                        error_class="invalid_compaction_output",
                    )
                self._fall_back(after_call_index, turn_id, "no_compaction_item", outcome.response_id, detail)
        outcome, attempt = await self._request(settings, after_call_index, turn_id, [summarization_prompt_item()],
                                               text_only=True)
        summary = summary_text(outcome.output)
        if not summary:
            raise ProtocolError(
                "local compaction: the summarization request returned no summary text (no assistant message with "
                "text); history is unchanged",
                error_class="empty_summary",
            )
        return outcome, Compacted("local", outcome.response_id, spent + outcome.usage, None, summary), attempt

    async def _request(
        self, settings: RequestSettings, after_call_index: int, turn_id: int, tail: list[Item], *,
        text_only: bool = False,
    ) -> tuple[ResponseOutcome, int]:
        outcome, _, attempt = await self._sampler.with_retries(
            settings, "compaction", after_call_index, turn_id, None, None, tail=tail, text_only=text_only
        )
        return outcome, attempt

    def _fall_back(self, after_call_index: int, turn_id: int, reason: str, response_id: str | None,
                   detail: str) -> None:
        """The server declined: local from now on (``model.compaction.fallback``, once)."""
        self.mode = "local"
        self._emit(EventKind.MODEL_COMPACTION_FALLBACK, {
            "after_model_call_index": after_call_index, "reason": reason, "response_id": response_id,
            "detail": detail,
        }, turn_id)
