"""Sandbox and approval settings between the protocol and the runtime (pure).

The protocol names (``SandboxMode``, ``SandboxPolicy``, ``AskForApproval`` of the v2
schema) map to ``ta.Sandbox``/``ta.SandboxMode`` and ``ta.ApprovalPolicy``:

- ``thread/start``/``thread/resume``/``thread/fork`` ``sandbox``: ``"read-only"``,
  ``"workspace-write"``, ``"danger-full-access"`` (network off in the first two);
- ``turn/start`` ``sandboxPolicy``: ``{type: readOnly, networkAccess}``,
  ``{type: workspaceWrite, writableRoots, networkAccess}``, ``{type:
  dangerFullAccess}``. ``externalSandbox`` (confinement done by someone else) and
  ``excludeSlashTmp``/``excludeTmpdirEnvVar: true`` (commands here always get a
  private writable ``/tmp``) cannot be honoured and are refused;
- ``approvalPolicy``: ``"untrusted"``, ``"on-request"``, ``"never"``. The schema has
  no ``on-failure`` (codex dropped it) and granular policies are not supported;
- ``permissions`` (experimental: a named permission profile, instead of ``sandbox``):
  codex's built-in profiles ``":read-only"``, ``":workspace"`` and
  ``":danger-full-access"`` are those three modes; other (user-defined) profiles live
  in a codex config this server does not read, and are refused.

A thread keeps what was *requested* (``ThreadMeta.sandbox``, ``approval_policy``; None
is the server's configuration), so a cold resume asks for the same again; what the
responses report is what the agent *runs* (``sandbox_json`` of its effective sandbox,
after the default's fallback where no sandbox works).
"""

from __future__ import annotations

from typing import Any

from .._errors import ConfigError
from .._tools._sandbox import SandboxUnavailable
from .._tools._security import ApprovalPolicy, Sandbox, SandboxMode
from ._jsonrpc import InvalidParams, InvalidRequest
from ._params import Params, shown

__all__ = ["approval_json", "parse_approval", "parse_sandbox_mode", "parse_sandbox_policy", "requested_sandbox",
           "sandbox_json", "unavailable"]

Json = dict[str, Any]
_MODES = {mode.value: mode for mode in SandboxMode}
_POLICIES = {"untrusted": ApprovalPolicy.UNTRUSTED, "on-request": ApprovalPolicy.ON_REQUEST,
             "never": ApprovalPolicy.NEVER}
_TYPES = {"readOnly": SandboxMode.READ_ONLY, "workspaceWrite": SandboxMode.WORKSPACE_WRITE,
          "dangerFullAccess": SandboxMode.DANGER_FULL_ACCESS}


_PROFILES = {":read-only": "read-only", ":workspace": "workspace-write", ":danger-full-access": "danger-full-access"}


def parse_sandbox_mode(params: Params, name: str = "sandbox") -> Json | None:
    """``sandbox`` (a ``SandboxMode`` name) -- or the built-in permission profile
    ``permissions`` names -- as a requested ``SandboxPolicy``, or None."""
    value = params.get(name)
    profile = params.get("permissions")
    if profile is not None:
        if value is not None:
            raise InvalidParams(f"{params.method}: `permissions` cannot be combined with `{name}`; give one of them")
        if not isinstance(profile, str) or profile not in _PROFILES:
            raise InvalidParams(f"{params.method}: `permissions` must be one of codex's built-in profiles "
                                f"({', '.join(_PROFILES)}) or null; this server reads no codex config that "
                                f"defines others, got {shown(profile)}")
        value = _PROFILES[profile]
    if value is None:
        return None
    if not isinstance(value, str) or value not in _MODES:
        raise InvalidParams(f"{params.method}: `{name}` must be one of {', '.join(_MODES)} or null, got {shown(value)}")
    return sandbox_json(Sandbox(_MODES[value]))


def parse_sandbox_policy(params: Params, name: str = "sandboxPolicy") -> Json | None:
    """``sandboxPolicy`` (a ``SandboxPolicy`` object), checked; None when absent."""
    value = params.get(name)
    if value is None:
        return None
    where = f"{params.method}: `{name}`"
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "externalSandbox":
        raise InvalidParams(f"{where}: externalSandbox is not supported (this server confines commands itself); "
                            "use readOnly, workspaceWrite or dangerFullAccess")
    if not isinstance(value, dict) or not isinstance(kind, str) or kind not in _TYPES:
        raise InvalidParams(f"{where} must be {{type: readOnly | workspaceWrite | dangerFullAccess, ...}}, "
                            f"got {shown(value)}")
    for flag in ("excludeSlashTmp", "excludeTmpdirEnvVar"):
        if value.get(flag) not in (None, False):
            raise InvalidParams(f"{where}: {flag} must be false or absent; sandboxed commands here always get a "
                                "private writable /tmp (and TMPDIR=/tmp)")
    network = value.get("networkAccess", False)
    if not isinstance(network, bool):
        raise InvalidParams(f"{where}: networkAccess must be true or false, got {shown(network)}")
    roots = value.get("writableRoots", [])
    if not isinstance(roots, list) or not all(isinstance(root, str) for root in roots):
        raise InvalidParams(f"{where}: writableRoots must be an array of absolute paths, got {shown(roots)}")
    if roots and kind != "workspaceWrite":
        raise InvalidParams(f"{where}: writableRoots applies to workspaceWrite only")
    asked = {"type": kind, "networkAccess": network, "writableRoots": roots}
    try:
        return sandbox_json(requested_sandbox(asked))
    except ConfigError as exc:  # a writable root that is not an existing absolute directory
        raise InvalidParams(f"{where}: {exc}") from None


def parse_approval(params: Params, name: str = "approvalPolicy") -> ApprovalPolicy | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, dict) and "granular" in value:
        raise InvalidParams(f"{params.method}: granular approval policies are not supported; use untrusted, "
                            "on-request or never")
    if not isinstance(value, str) or value not in _POLICIES:
        raise InvalidParams(f"{params.method}: `{name}` must be one of {', '.join(_POLICIES)} or null, "
                            f"got {shown(value)}")
    return _POLICIES[value]


def requested_sandbox(policy: Json) -> Sandbox:
    """A stored ``SandboxPolicy`` (as ``parse_*`` made it) as the runtime's ``Sandbox``."""
    kind = _TYPES[policy["type"]]
    network = bool(policy.get("networkAccess", False)) and kind is not SandboxMode.DANGER_FULL_ACCESS
    return Sandbox(kind, network=network, writable_roots=tuple(policy.get("writableRoots", ())))


def sandbox_json(sandbox: Sandbox) -> Json:
    """``SandboxPolicy`` of a ``Sandbox`` (what the thread runs, or what it asked for)."""
    if sandbox.mode is SandboxMode.DANGER_FULL_ACCESS:
        return {"type": "dangerFullAccess"}
    if sandbox.mode is SandboxMode.READ_ONLY:
        return {"type": "readOnly", "networkAccess": sandbox.network}
    return {"type": "workspaceWrite", "writableRoots": [str(root) for root in sandbox.writable_roots],
            "networkAccess": sandbox.network, "excludeTmpdirEnvVar": False, "excludeSlashTmp": False}


def approval_json(policy: ApprovalPolicy) -> str:
    """The ``AskForApproval`` name (the server refuses configurations with ``on-failure``)."""
    return policy.value


def unavailable(method: str, exc: SandboxUnavailable) -> InvalidRequest:
    """A requested sandbox that cannot work on the server's machine (nothing was changed)."""
    return InvalidRequest(f"{method}: {exc} (over this protocol: ask for sandbox \"danger-full-access\", or "
                          "sandboxPolicy {type: dangerFullAccess})")
