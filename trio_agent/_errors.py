"""The error tree of trio_agent.

Every error the library raises on purpose is an :class:`AgentError`::

    AgentError
     +-- ConfigError              invalid AgentConfig / Responses combination (raised on construction)
     +-- AgentClosed              the agent's block has been left; no new prompts are accepted
     +-- InvalidPrompt            an empty prompt or steer
     +-- SteerQueueFull           the 9th pending steer of one turn
     +-- TurnNotSteerable         steering a queued, finished or cancelled turn
     +-- TurnNotCancellable       cancelling a finished or already cancelled turn
     +-- TurnCancelled            Turn.result() of a cancelled turn
     +-- TurnFailed               Turn.result() of a failed turn (.responses_error, .cause)
     +-- ForkBeforeCompletedTurn  fork() before the agent reached any model boundary
     +-- CheckpointLineageMismatch  fork_from() with a result of another lineage
     +-- InvalidSessionSnapshot   a snapshot that cannot be resumed
     +-- WorkspaceChanged         resuming in another workspace
     +-- MailboxFull              post_mail() to an agent already holding 1,024 undelivered messages
     +-- SleepRefused             Agent.sleep() while a turn runs or is queued, or while asleep already
     +-- EventsOverflowed         an agent.events.subscribe() consumer fell max_buffer events behind
     +-- RolloutError             a rollout file cannot be written, read, or is held by another
     |                            live writer (defined in ``_rollout``)
     +-- ResponsesError           anything that went wrong talking to the Responses API
          +-- AuthenticationError  credentials refused (HTTP 401/403, either transport) or the
          |                        ChatGPT auth source failed; never retried
          +-- ConnectionFailed     connect or WebSocket handshake failed (a refused connection,
          |                        TLS, a rejected handshake other than 401/403)
          +-- ConnectionLost       the socket closed or a receive/send failed mid-request
          +-- ResponseTimeout      no frame within the idle timeout, or a send timed out
          +-- ProtocolError        a frame that is not JSON, binary, or malformed
          +-- ApiError             an ``error`` frame or ``response.failed``/``incomplete``
               +-- InvalidImageRequest   the API rejected an image (terminal)
               +-- UsageLimitExceeded    quota / usage limit (terminal)
               +-- CheckpointMissing     ``previous_response_not_found`` (replayed once in full)

(``MailboxFull`` is defined in ``_runtime._turns._input``, ``SleepRefused`` in ``_runtime._turns._idle_sleep``,
``EventsOverflowed`` in ``_events``, ``RolloutError`` and the ``RolloutWarning`` about a skipped torn last line in
``_rollout``.)

Foreign exceptions (trio_websocket, httpx, OSError, JSON errors) are mapped into
``ResponsesError`` subclasses once, in ``_transport``, with ``raise ... from exc``.
Every ``ResponsesError`` carries ``error_class`` (a stable snake_case string used in
events and retry decisions), ``retryable`` and ``retry_after`` (seconds or None).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._event_payloads._shared import JsonValue

__all__ = [
    "AgentClosed",
    "AgentError",
    "ApiError",
    "AuthenticationError",
    "CheckpointLineageMismatch",
    "CheckpointMissing",
    "ConfigError",
    "ConnectionFailed",
    "ConnectionLost",
    "ForkBeforeCompletedTurn",
    "InvalidImageRequest",
    "InvalidPrompt",
    "InvalidSessionSnapshot",
    "ProtocolError",
    "ResponseTimeout",
    "ResponsesError",
    "SteerQueueFull",
    "TurnCancelled",
    "TurnFailed",
    "TurnNotCancellable",
    "TurnNotSteerable",
    "UsageLimitExceeded",
    "WorkspaceChanged",
]


class AgentError(Exception):
    """Base class of every error trio_agent raises on purpose."""


class ConfigError(AgentError, ValueError):
    """Raised by ``AgentConfig``/``Responses`` construction for invalid settings."""


class AgentClosed(AgentError):
    """Raised by ``Agent.prompt()`` and friends once the agent's block is closing."""


class InvalidPrompt(AgentError, ValueError):
    """Raised for an empty prompt or steer text."""


class SteerQueueFull(AgentError):
    """Raised by ``Turn.steer()`` when 8 steers are already pending for the turn."""


class TurnNotSteerable(AgentError):
    """Raised by ``Turn.steer()`` for a turn that is queued, finished or cancelled."""


class TurnNotCancellable(AgentError):
    """Raised by ``Turn.cancel()`` for a turn that already finished or was cancelled."""


class TurnCancelled(AgentError):
    """Raised by ``Turn.result()`` when the turn was cancelled."""


class TurnFailed(AgentError):
    """Raised by ``Turn.result()`` when the turn failed.

    ``responses_error`` is the underlying :class:`ResponsesError` when the failure came
    from the model transport, else ``None``; ``__cause__`` is the original exception.
    """

    def __init__(self, message: str, *, responses_error: ResponsesError | None = None) -> None:
        super().__init__(message)
        self.responses_error = responses_error


class ForkBeforeCompletedTurn(AgentError):
    """Raised by ``fork()`` before the agent has reached any model boundary."""


class CheckpointLineageMismatch(AgentError, ValueError):
    """Raised by ``fork_from()`` with a ``TurnResult`` from another lineage."""


class InvalidSessionSnapshot(AgentError, ValueError):
    """Raised when a ``SessionSnapshot`` cannot be loaded or resumed."""


class WorkspaceChanged(AgentError):
    """Raised when a resumed session names a different workspace than the config."""


class ResponsesError(AgentError):
    """A failure talking to the Responses API.

    Attributes: ``error_class`` (stable string, e.g. ``"premature_close"``),
    ``retryable``, ``retry_after`` (server-suggested delay in seconds or None),
    ``failure_phase`` (``connect|send|receive|idle|api|protocol``), ``code`` (API error
    code or None), ``status`` (HTTP status or None) and ``event`` (the raw frame or None).
    """

    default_class = "responses"
    default_phase = "api"
    default_retryable = False

    def __init__(
        self,
        message: str,
        *,
        error_class: str | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
        failure_phase: str | None = None,
        code: str | None = None,
        status: int | None = None,
        event: dict[str, JsonValue] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.error_class = error_class or self.default_class
        self.retryable = self.default_retryable if retryable is None else retryable
        self.retry_after = retry_after
        self.failure_phase = failure_phase or self.default_phase
        self.code = code
        self.status = status
        self.event = event  # the raw frame (None when the failure was not a frame)


class AuthenticationError(ResponsesError):
    """The credentials were not accepted, or could not be obtained.

    Raised (inside ``TurnFailed.responses_error``, or as a failed warmup) when the server
    answers HTTP 401/403 -- the WebSocket handshake (``error_class="handshake_rejected"``)
    or an HTTPS request (``"https_rejected"``), with ``status`` and the API's ``code`` --
    and when a ChatGPT auth source's ``snapshot()`` / ``recover_unauthorized()`` raised or
    returned an unusable token (``"auth_source"``; the source's exception is ``__cause__``).
    Never retried. The message never contains the token.
    """

    default_class = "auth_source"
    default_phase = "connect"


class ConnectionFailed(ResponsesError):
    """Connecting or the WebSocket handshake failed (rejections carry ``status``)."""

    default_class = "handshake_transport"
    default_phase = "connect"
    default_retryable = True


class ConnectionLost(ResponsesError):
    """The socket closed, or sending/receiving failed, before the response completed."""

    default_class = "premature_close"
    default_phase = "receive"
    default_retryable = True


class ResponseTimeout(ResponsesError):
    """No frame arrived within the idle timeout, or a send did not finish in time."""

    default_class = "event_idle_timeout"
    default_phase = "idle"
    default_retryable = True


class ProtocolError(ResponsesError):
    """The server sent something that is not a valid Responses frame."""

    default_class = "invalid_payload"
    default_phase = "protocol"


class ApiError(ResponsesError):
    """The API answered with an ``error`` frame, ``response.failed`` or ``response.incomplete``."""

    default_class = "api"


class InvalidImageRequest(ApiError):
    """The API rejected an image in the request; terminal, never retried."""

    default_class = "invalid_image_request"


class UsageLimitExceeded(ApiError):
    """A quota or usage limit was reached; terminal, never retried."""

    default_class = "usage_limit"


class CheckpointMissing(ApiError):
    """``previous_response_not_found``: the chained response is gone; replay in full once."""

    default_class = "checkpoint_missing"
    default_retryable = True
