"""The bodies of an agent's requests, in its profile's dialect, and their JSON text.

``RequestBodies`` builds each request from the ledger's history and the chain as they
stand when the attempt sends (the OpenAI dialect: ``_wire.request``; ``Profile.GENERIC``:
``_wire.portable``, with the tools of the prefix converted once per prefix and the
optional fields a server refused by name left out), and encodes it, with what every
request repeats encoded once (``RequestText``). It reads history and never writes it;
the chain and the WebSocket turn state are the model client's, passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._config import AgentConfig, History, Profile
from ..._errors import ApiError, AuthenticationError, ResponsesError
from ..._events import EventKind
from ..._session.conversation import Chain, full_input
from ..._session.ledger import TurnLedger
from ..._wire.request import RequestSettings, build_response_create
from ._request_text import RequestText

__all__ = ["RequestBodies"]


class RequestBodies:
    def __init__(self, config: AgentConfig, ledger: TurnLedger) -> None:
        self._config = config
        self._ledger = ledger
        self._text = RequestText()
        self.portable = config.profile is Profile.GENERIC
        # Read once (the configuration is frozen): ``responses.history`` is a property that
        # derives the profile and the default ``store`` at every read, and this is per request.
        self._full_replay = config.responses.history is History.FULL_REPLAY
        # Profile.GENERIC: the tools and instructions of the prefix they were made from.
        self._portable_version = 0  # bumped with every new tool list (RequestText's key)
        self._portable_for: tuple[dict[str, Any], ...] | None = None
        self._portable_tools: list[dict[str, Any]] = []
        self._portable_prefix: list[dict[str, Any]] = []
        self._portable_instructions: str | None = None
        self.dropped: frozenset[str] = frozenset()  # optional fields a server refused by name
        # The prefix requests carry, when it may differ from the ledger's (``_live_prefix``:
        # exec's description listing the active MCP tools); None: the ledger's.
        self.live_prefix: Callable[[], tuple[dict[str, Any], ...]] | None = None
        self.last_body: dict[str, Any] | None = None  # the latest request's body (refused_fields)

    def body(self, settings: RequestSettings, chain: Chain, turn_state: str | None, *, warmup: bool,
             websocket: bool) -> dict[str, Any]:
        if self.portable:
            return self._portable_body(settings, chain, websocket=websocket)
        ledger = self._ledger
        if warmup:
            return build_response_create(settings, ledger.prefix, generate=False, turn_state=turn_state)
        # HTTPS with store: false cannot chain at all (SPEC sec. 2).
        full = (
            self._full_replay
            or not chain.can_chain
            or (not settings.store and not websocket)
        )
        if full:
            return build_response_create(
                settings, full_input(self._prefix(), ledger.history), websocket=websocket, turn_state=turn_state
            )
        return build_response_create(
            settings, chain.incremental_input(ledger.history), previous_response_id=chain.previous_response_id,
            websocket=websocket, turn_state=turn_state,
        )

    def _portable_body(self, settings: RequestSettings, chain: Chain, *, websocket: bool) -> dict[str, Any]:
        """A ``Profile.GENERIC`` request (``_wire.portable``); never a warmup."""
        from ..._session.context import INSTRUCTIONS_ID
        from ..._wire.portable import build_portable_create, leading_developer_texts, portable_tools, split_prefix

        ledger = self._ledger
        prefix = self._prefix()
        if self._portable_for is not prefix:
            definitions, self._portable_instructions, rest = split_prefix(prefix, INSTRUCTIONS_ID)
            self._portable_tools, self._portable_prefix = portable_tools(definitions), rest
            self._portable_for = prefix
            self._portable_version += 1
        full = self._full_replay or not chain.can_chain or not settings.store
        history = ledger.history
        lead = leading_developer_texts(history)
        instructions = "\n\n".join(t for t in (self._portable_instructions, *lead) if t) or None
        if full:
            items: Any = full_input(self._portable_prefix, history)
            if lead:  # they travel in ``instructions``: a bridge may let one replace it
                items = [*self._portable_prefix, *history.since(len(lead))]
            return build_portable_create(
                settings, items, self._portable_tools,
                instructions=instructions, dropped=self.dropped, websocket=websocket,
            )
        delta = chain.incremental_input(history)
        if chain.delta_start < len(lead):
            delta = history.since(len(lead))
        return build_portable_create(
            settings, delta, self._portable_tools,
            instructions=instructions, previous_response_id=chain.previous_response_id,
            dropped=self.dropped, websocket=websocket,
        )

    def _prefix(self) -> tuple[dict[str, Any], ...]:
        return self._ledger.prefix if self.live_prefix is None else self.live_prefix()

    def text(self, body: dict[str, Any], settings: RequestSettings, turn_state: str | None, *, warmup: bool,
             websocket: bool) -> str:
        """``dumps(body)``, encoding only what changes from one request to the next."""
        key: tuple[object, ...] = (settings, warmup, websocket, turn_state)
        if self.portable:  # the tools travel in the repeated part: a new list is a new layout
            key = (*key, self._portable_version, self.dropped)
        return self._text.text(body, key)

    def refused_fields(self, exc: ResponsesError) -> frozenset[str]:
        """``Profile.GENERIC``: the optional fields of the last request that a terminal
        rejection names ("Unknown parameter: 'include'", "does not support parameters:
        ['reasoning_effort']"), not left out yet: a retry without them may succeed."""
        if not self.portable or self.last_body is None or exc.retryable or not isinstance(exc, ApiError) \
                or isinstance(exc, AuthenticationError):
            return frozenset()
        from ..._wire.portable import named_fields

        return named_fields(str(exc), self.last_body) - self.dropped

    def drop_fields(self, fields: frozenset[str], emit: Callable[..., Any]) -> None:
        """Leave ``fields`` out of every later request (a server refused them by name),
        announced by an ``api.warning`` (``request_fields_dropped``)."""
        self.dropped = self.dropped | fields
        shown = ", ".join(sorted(fields))
        emit(EventKind.API_WARNING, {
            "code": "request_fields_dropped", "fields": sorted(fields),
            "message": f"the server refused the optional request field(s) {shown}; retrying without them, "
                       "and leaving them out from now on",
        })
