"""``Approvals``: when calls wait for approval and who decides, and the hook's protocol.

A module of its own, apart from ``policies``: the hook's annotation names
``ApprovalRequest`` (``approval_request.py``, which names ``ApprovalKind``), so
keeping it away from the enums keeps the import graph free of cycles.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol

import attrs

from .._errors import ConfigError
from .policies import DEFAULT_APPROVAL_TIMEOUT, ApprovalDecision, ApprovalPolicy, as_policy

if TYPE_CHECKING:
    from .approval_request import ApprovalRequest

__all__ = ["ApprovalHook", "Approvals"]


class ApprovalHook(Protocol):
    """The approval hook: ``async def hook(request: ta.ApprovalRequest) -> ta.ApprovalDecision``.

    A callback protocol rather than a ``Callable[[ApprovalRequest], ...]`` alias: the
    alias would need ``ApprovalRequest`` at import (``approval_request`` is loaded by
    the first request), and ``Approvals.hook``'s annotation must resolve without it."""

    def __call__(self, request: ApprovalRequest, /) -> Awaitable[ApprovalDecision]: ...


@attrs.frozen
class Approvals:
    """When calls wait for approval, and who decides (``AgentConfig(approval=...)``).

    ``hook``: an async callable ``hook(request) -> ApprovalDecision``, required by
    every policy but ``NEVER``. It runs in the task of the call it decides and is
    cancelled with it (a cancelled turn cancels its pending approvals). It may take at
    most ``timeout`` seconds (Trio's clock); a hook that times out, raises, or returns
    something other than an ``ApprovalDecision`` denies the call. The bound works by
    cancellation: a hook must await (a blocking call inside it cannot be cut short).
    """

    policy: ApprovalPolicy = attrs.field(default=ApprovalPolicy.NEVER, converter=as_policy)
    hook: ApprovalHook | None = None
    timeout: float = DEFAULT_APPROVAL_TIMEOUT

    def __attrs_post_init__(self) -> None:
        if self.hook is not None and not callable(self.hook):
            raise ConfigError(f"approval hook must be an async callable (request) -> decision, got {self.hook!r}")
        if self.policy is not ApprovalPolicy.NEVER and self.hook is None:
            raise ConfigError(
                f"approval policy {self.policy.value!r} asks before some calls and there is no hook to "
                f"answer: pass approval=ta.Approvals(ta.ApprovalPolicy.{self.policy.name}, hook=...) with "
                "an async callable (ta.ApprovalRequest) -> ta.ApprovalDecision, or use ApprovalPolicy.NEVER"
            )
        timeout = self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
            raise ConfigError(f"approval timeout must be a positive, finite number of seconds, got {timeout!r}")
