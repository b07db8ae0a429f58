"""The exchange interface: one request and its response, over one transport.

Theory of operation: an attempt reaches the model by one ``Route``, chosen once, when
the model client enters the attempt slot (``ModelClient.enter_now``, or ``enter``): a live WebSocket
(``_websocket_exchange.WebSocketRoute``) or an HTTPS request with this attempt's
headers (``_https_exchange.HttpsRoute``). Nothing after that point asks which
transport it is: the attempt (``_attempt.AttemptSlot.send``) builds the body in the
route's shape, makes a ``ResponseFeed`` (the frames' road to events and the
accumulator) and asks the route for a ``ResponseExchange``, which sends the body and
returns the outcome. A route that can recover from a failure (HTTPS with ChatGPT auth:
a 401, once) says so, and the attempt runs a new exchange; an exchange whose response
is still open when its outcome is known (HTTPS: the rest of the body) is finished by
the model client later (``ModelClient.settle``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..._config import Transport
    from ..._errors import ResponsesError
    from ..._wire.stream import ResponseOutcome
    from .._turns._turn import Preemption
    from ._response_feed import ResponseFeed

__all__ = ["ResponseExchange", "Route"]


class ResponseExchange(Protocol):
    """One request and its response (the WebSocket's or HTTPS's)."""

    @property
    def feed(self) -> ResponseFeed:
        """Where its frames go (first event and output times: ``model.call.completed``)."""

    async def run(self, body: dict[str, Any], text: str) -> ResponseOutcome:
        """Send ``body`` (whose JSON is ``text``) and return the outcome; ``ResponsesError``
        on failure."""

    @property
    def unfinished(self) -> bool:
        """The response is still open after its outcome: ``finish`` reads its rest."""

    async def finish(self) -> None:
        """Read what is left of the response and close it (best effort)."""


class Route(Protocol):
    """How one attempt reaches the model (see the module docstring)."""

    @property
    def transport(self) -> Transport:
        """The transport, as the events name it."""

    @property
    def transport_name(self) -> str:
        """``transport.value``, read once per route class (an enum's ``value`` is a
        descriptor call, and the feed of every request names it)."""

    @property
    def websocket(self) -> bool:
        """Whether the body is a WebSocket ``response.create`` frame (else an HTTPS POST's)."""

    @property
    def stale(self) -> Collection[str]:
        """Responses that ended on this connection: a frame naming one is a leftover."""

    def exchange(self, feed: ResponseFeed, preemption: Preemption | None) -> ResponseExchange:
        """A new exchange of one request on this route."""

    async def recovered(self, error: ResponsesError) -> bool:
        """Whether the attempt may send again after ``error`` (its cause repaired)."""

    def ended(self, outcome: ResponseOutcome) -> None:
        """The attempt's response ended with ``outcome``."""
