"""What commands and patches may do: the sandbox and approval values, re-exported.

They live in the configuration layer (``trio_agent/_base/policies.py`` and
``approvals.py``, docs/architecture.md) so that ``_config`` names them without
importing the tools package; this module keeps the names where the tools, the runtime
and the public face (``ta.Sandbox``, ``ta.Approvals``, ...) import them from.
"""

from __future__ import annotations

from .._base.approvals import ApprovalHook, Approvals
from .._base.policies import (
    DEFAULT_APPROVAL_TIMEOUT,
    ApprovalDecision,
    ApprovalKind,
    ApprovalPolicy,
    Sandbox,
    SandboxMode,
)

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "ApprovalDecision",
    "ApprovalHook",
    "ApprovalKind",
    "ApprovalPolicy",
    "Approvals",
    "Sandbox",
    "SandboxMode",
]
