"""What commands and patches may do: sandbox modes, approval policies, the kind and
the decision of an approval, and ``Sandbox``.

Pure values, validated on construction (``ConfigError``), in the configuration layer
(docs/architecture.md): they import nothing but ``_errors``. How a mode is enforced is
``_tools/_sandbox.py``; when a call needs approval is ``_tools/_policy.py``; asking is
``_runtime/_calls/_permissions.py``; ``Approvals`` (who decides) is ``approvals.py``.
"""

from __future__ import annotations

import enum
from pathlib import Path

import attrs

from .._errors import ConfigError

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "ApprovalDecision",
    "ApprovalKind",
    "ApprovalPolicy",
    "Sandbox",
    "SandboxMode",
    "as_policy",
]

#: Seconds an approval hook may take before the call is treated as denied.
DEFAULT_APPROVAL_TIMEOUT = 600.0


class SandboxMode(enum.Enum):
    """What a command may write (the values are codex's ``sandbox_mode`` names).

    ``READ_ONLY``: nothing (``/dev/null`` and the like excepted). ``WORKSPACE_WRITE``:
    the workspace, a private ``/tmp`` and ``Sandbox.writable_roots``; ``.git`` stays
    read-only unless ``Sandbox.writable_git``. ``DANGER_FULL_ACCESS``: no sandbox, the
    agent's own rights (network included).
    """

    READ_ONLY = "read-only"
    WORKSPACE_WRITE = "workspace-write"
    DANGER_FULL_ACCESS = "danger-full-access"


class ApprovalPolicy(enum.Enum):
    """When a call waits for the approval hook (codex's ``approval_policy`` names).

    ``NEVER``: never asks; what the sandbox forbids fails, and a request to run
    outside it is refused. ``ON_REQUEST``: asks when the model requests to run a
    command outside the sandbox (``sandbox_permissions: "require_escalated"``) and
    before a patch the sandbox would not allow. ``ON_FAILURE``: runs in the sandbox and
    asks to run a command again outside it when it failed the way a sandbox denial
    looks. ``UNTRUSTED``: asks before every command that is not a known read-only one
    and before every patch, and after a sandbox denial like ``ON_FAILURE``.
    """

    NEVER = "never"
    ON_REQUEST = "on-request"
    ON_FAILURE = "on-failure"
    UNTRUSTED = "untrusted"


class ApprovalDecision(enum.Enum):
    """What the hook decided.

    ``APPROVE``: this call runs. ``APPROVE_FOR_SESSION``: this call runs, and the same
    command (or later changes to the same files) runs without asking for the rest of
    the agent's life. ``DENY``: the call fails with a result saying it was denied; the
    turn goes on. ``ABORT``: denied, and the turn is cancelled.
    """

    APPROVE = "approve"
    APPROVE_FOR_SESSION = "approve_for_session"
    DENY = "deny"
    ABORT = "abort"


class ApprovalKind(enum.Enum):
    """What is to be approved: a shell command or the file changes of a patch."""

    COMMAND = "command"
    FILE_CHANGE = "file_change"


def _mode(value: SandboxMode | str) -> SandboxMode:
    try:
        return SandboxMode(value)
    except ValueError:
        names = ", ".join(repr(mode.value) for mode in SandboxMode)
        raise ConfigError(f"sandbox mode must be a ta.SandboxMode or one of {names}, got {value!r}") from None


def as_policy(value: ApprovalPolicy | str) -> ApprovalPolicy:
    try:
        return ApprovalPolicy(value)
    except ValueError:
        names = ", ".join(repr(policy.value) for policy in ApprovalPolicy)
        raise ConfigError(
            f"approval policy must be a ta.ApprovalPolicy or one of {names}, got {value!r}"
        ) from None


def _roots(value: object) -> tuple[Path, ...]:
    if isinstance(value, str | Path):
        raise ConfigError("writable_roots must be a list of directories, got a single path; pass [path]")
    try:
        return tuple(Path(root) for root in value)  # type: ignore[attr-defined]
    except TypeError:
        raise ConfigError(f"writable_roots must be a list of directories, got {value!r}") from None


@attrs.frozen
class Sandbox:
    """How ``exec_command`` confines commands (``AgentConfig(sandbox=...)``).

    ``mode``: see :class:`SandboxMode`. ``network``: whether commands in a sandbox may
    use the network (off: a network namespace of their own with only a loopback
    interface; ``DANGER_FULL_ACCESS`` always has the agent's network).
    ``writable_git``: whether ``WORKSPACE_WRITE`` lets commands write the workspace's
    ``.git`` (default: read-only). ``writable_roots``: more existing directories
    ``WORKSPACE_WRITE`` makes writable. ``bwrap``: the Bubblewrap executable (default:
    ``bwrap`` on ``$PATH``).
    """

    mode: SandboxMode = attrs.field(default=SandboxMode.WORKSPACE_WRITE, converter=_mode)
    network: bool = False
    writable_git: bool = False
    writable_roots: tuple[Path, ...] = attrs.field(default=(), converter=_roots)
    bwrap: str | None = None

    def __attrs_post_init__(self) -> None:
        for name in ("network", "writable_git"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"Sandbox.{name} must be True or False, got {getattr(self, name)!r}")
        for root in self.writable_roots:
            if not root.is_absolute() or not root.is_dir():
                raise ConfigError(
                    f"writable root {str(root)!r} is not an existing absolute directory; "
                    "pass directories that exist, such as Path.home() / '.cache'"
                )
        if self.bwrap is not None and (not isinstance(self.bwrap, str) or not self.bwrap):
            raise ConfigError(f"Sandbox.bwrap must be a path or a command name, got {self.bwrap!r}")

    @property
    def confined(self) -> bool:
        """Whether commands run in a sandbox at all (every mode but ``DANGER_FULL_ACCESS``)."""
        return self.mode is not SandboxMode.DANGER_FULL_ACCESS

    @property
    def network_enabled(self) -> bool:
        """Whether commands can reach the network."""
        return self.network or not self.confined
