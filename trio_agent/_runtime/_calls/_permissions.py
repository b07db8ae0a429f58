"""The sandbox and the approval policy of one agent's ``exec_command`` and ``apply_patch``.

Theory of operation (issue 14). :class:`ExecGuard` stands between the tool dispatcher
and the tools. :meth:`~ExecGuard.prepare` runs at agent start: it resolves the
sandbox (``_tools/_sandbox.resolve_sandbox``; a configured mode that cannot work
raises ``SandboxUnavailable`` out of ``open_agent``; the default that falls back to
``danger-full-access`` emits ``sandbox.unavailable`` and a ``RuntimeWarning``). Then,
per call:

* ``exec_command``: ``_tools/_policy.plan_command`` says run, refuse (a failed result),
  or ask first (maybe to run outside the sandbox). A command that ran in the sandbox
  and failed like a sandbox denial is, under ``on-failure``/``untrusted``, asked again
  and, if approved, run again outside it.
* ``apply_patch``: ``plan_patch`` on the files it changes, as they resolve in the
  workspace; a denied patch never touches the disk. Where the sandbox keeps ``.git``
  read-only, the patch is applied with ``protect_git``: it may write only the ``.git``
  places its approval named, whatever a symlink swapped in meanwhile points to.

Asking (:meth:`ExecGuard._ask`) emits ``approval.requested``, awaits the hook in the
calling task -- bounded by ``Approvals.timeout``, inside a scope that
:meth:`~ExecGuard.turn_ended` cancels, so the request never outlives its turn -- and
emits ``approval.resolved`` with the ``decision`` and its ``source``: ``hook``,
``timeout``, ``error`` (the hook raised or returned something else), ``withdrawn``
(the turn ended first) or ``cancelled`` (the call itself was cancelled: the event is
emitted and ``Cancelled`` propagates). A call covered by an earlier
``approve_for_session`` asks nobody and emits nothing. Everything but an approval
denies; ``abort`` also cancels the turn. Denials are ``ShellError``/``PatchError``,
which the dispatcher turns into failed results that say so.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ..._events import EventKind
from ..._tools._sandbox import Confinement, resolve_sandbox
from ..._tools._security import (
    ApprovalDecision,
    ApprovalKind,
    Approvals,
    Sandbox,
    SandboxMode,
)

# The per-call modules (the policy, the patch parser, the exec arguments) are imported by
# the first call that needs them: an agent that never runs a tool never loads them.
if TYPE_CHECKING:
    from ..._base.approval_request import ApprovalRequest
    from ..._tools.exec_command import ExecResult, ShellSessions

__all__ = ["ExecGuard"]

_APPROVED = (ApprovalDecision.APPROVE, ApprovalDecision.APPROVE_FOR_SESSION)
_DENIED_BECAUSE = {
    "hook": "the user denied it",
    "timeout": "nobody decided within {timeout:g} s",
    "error": "the approval hook failed ({error})",
    "withdrawn": "its turn ended before a decision",
}


class _Denied(Exception):
    """A decision other than an approval, with the sentence that explains it."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class ExecGuard:
    """Sandbox and approvals for one agent (see the module docstring).

    ``emit(kind, payload, turn_id)`` reports events; ``cancel_turn(turn_id)`` cancels a
    running turn (an ``abort`` decision)."""

    def __init__(
        self,
        sandbox: Sandbox | None,
        approvals: Approvals,
        workspace: Path,
        emit: Callable[..., Any],
        cancel_turn: Callable[[int], None],
        session_id: str | None = None,
    ) -> None:
        self._session_id = session_id  # named in each request: whose call it is
        self._requested = sandbox
        self._approvals = approvals
        self._workspace = workspace
        self._emit = emit
        self._cancel_turn = cancel_turn
        self._confinement: Confinement | None = None
        self._approved_commands: set[tuple[str, bool]] = set()  # (command, outside the sandbox)
        self._approved_files: set[str] = set()
        self._approved_git: set[str] = set()  # canonical .git paths approved for the session
        self._pending: dict[int, set[trio.CancelScope]] = {}  # turn id -> scopes of its open requests
        self._next_id = 1

    # -- the sandbox ---------------------------------------------------------------------

    def prepare(self) -> None:
        """Resolve the sandbox once (idempotent); raises ``SandboxUnavailable``."""
        if self._confinement is not None:
            return
        self._install(self._requested)

    def reconfigure(self, sandbox: Sandbox | None, approvals: Approvals) -> None:
        """Another sandbox and approval policy for the calls made from now on (a command
        already running keeps its sandbox; approvals given for the session stay given).
        Raises ``SandboxUnavailable`` -- and changes nothing -- when an explicit mode
        cannot work here; ``None`` falls back as at start."""
        self._install(sandbox)
        self._requested = sandbox
        self._approvals = approvals

    @property
    def approvals(self) -> Approvals:
        return self._approvals

    def _install(self, requested: Sandbox | None) -> None:
        resolution = resolve_sandbox(requested)
        self._confinement = resolution.confinement
        if resolution.fallback is not None:
            reason = f"commands run without a sandbox (danger-full-access): {resolution.fallback}"
            self._emit(EventKind.SANDBOX_UNAVAILABLE, {"mode": SandboxMode.DANGER_FULL_ACCESS.value,
                                                       "reason": reason})
            warnings.warn(f"trio_agent: {reason}", RuntimeWarning, stacklevel=2)

    @property
    def confinement(self) -> Confinement:
        self.prepare()
        assert self._confinement is not None
        return self._confinement

    @property
    def sandbox(self) -> Sandbox:
        """The effective sandbox settings."""
        return self.confinement.sandbox

    def permissions_message(self) -> dict[str, Any]:
        from ..._session.context import permissions_message

        sandbox = self.sandbox
        return permissions_message(
            sandbox.mode.value, self._approvals.policy.value, network=sandbox.network_enabled,
            writable_roots=[str(root) for root in sandbox.writable_roots], writable_git=sandbox.writable_git,
        )

    # -- exec_command ----------------------------------------------------------------------

    async def exec_command(
        self, shell: ShellSessions, args: Mapping[str, object], call_id: str, turn_id: int | None,
        *, on_output: Callable[[str], None] | None = None,
    ) -> ExecResult:
        """Run ``args`` in ``shell`` as the policy allows; ``ShellError`` if it was denied.
        ``on_output`` gets the output as it arrives (of both runs, when one is retried)."""
        from ..._tools._policy import denial_hint, plan_command
        from ..._tools._shell_env import ShellError, parse_exec_args

        request = parse_exec_args(args, self._workspace)
        sandbox = self.sandbox
        plan = plan_command(
            self._approvals.policy, sandbox, request.cmd, escalate=request.escalate,
            justification=request.justification,
        )
        if plan.action == "refuse":
            raise ShellError(plan.reason)
        if plan.action == "ask":
            await self._approve_command(request.cmd, request.workdir, plan.reason, plan.outside_sandbox,
                                        call_id, turn_id)
        shell.confinement = self.confinement  # the sandbox current now (reconfigure may have changed it)
        result = await shell.exec_command(args, outside_sandbox=plan.outside_sandbox, on_output=on_output)
        if not plan.retry_on_denial or plan.outside_sandbox:
            return result
        hint = denial_hint(result.get("exit_code"), result["output"])
        if hint is None:
            return result
        network = "on" if sandbox.network_enabled else "off"
        reason = (f"it failed in the sandbox ({sandbox.mode.value}, network {network}) the way a sandbox "
                  f"denial looks: {hint!r}; approving runs it again outside the sandbox")
        try:
            await self._approve_command(request.cmd, request.workdir, reason, True, call_id, turn_id)
        except ShellError as exc:
            raise ShellError(
                f"{exc}\nOutput of the run in the sandbox (exit code {result.get('exit_code')}):\n{result['output']}"
            ) from None
        return await shell.exec_command(args, outside_sandbox=True, on_output=on_output)

    async def _approve_command(
        self, cmd: str, cwd: Path, reason: str, outside: bool, call_id: str, turn_id: int | None
    ) -> None:
        from ..._tools._shell_env import ShellError

        if (cmd, outside) in self._approved_commands:
            return
        where = " outside the sandbox" if outside else ""
        request = self._request(ApprovalKind.COMMAND, call_id, turn_id, cwd, reason, command=cmd,
                                outside_sandbox=outside)
        try:
            decision = await self._decide(request)
        except _Denied as denied:
            raise ShellError(f"exec_command was denied: {cmd!r} did not run{where}; {denied.why}") from None
        if decision is ApprovalDecision.APPROVE_FOR_SESSION:
            self._approved_commands.add((cmd, outside))

    # -- apply_patch -------------------------------------------------------------------------

    async def apply_patch(self, patch_text: str, workspace: Path, call_id: str, turn_id: int | None) -> str:
        """Apply the patch as the policy allows; ``PatchError`` if it was denied (then no
        file was changed) or does not apply."""
        from ..._base.approval_request import ChangedFile
        from ..._tools._patch_parse import PatchError, parse_patch
        from ..._tools._policy import plan_patch
        from ..._tools.apply_patch import apply_patch

        try:
            patch = parse_patch(patch_text)
        except PatchError:
            return await apply_patch(patch_text, workspace)  # nothing to approve: report the error
        changes = tuple(ChangedFile(c.path, c.kind, c.move_to) for c in patch.changes)
        sandbox = self.sandbox
        plan = plan_patch(self._approvals.policy, sandbox, changes, workspace=workspace)
        if plan.action == "refuse":
            raise PatchError(plan.reason)
        paths = {path for change in changes for path in (change.path, change.move_to) if path}
        if plan.action == "ask" and not (paths <= self._approved_files and plan.git <= self._approved_git):
            request = self._request(ApprovalKind.FILE_CHANGE, call_id, turn_id, workspace, plan.reason,
                                    changes=changes)
            try:
                decision = await self._decide(request)
            except _Denied as denied:
                raise PatchError(f"apply_patch was denied: no file was changed; {denied.why}") from None
            if decision is ApprovalDecision.APPROVE_FOR_SESSION:
                self._approved_files |= paths
                self._approved_git |= plan.git
        # .git stays read-only at write time too (issue 21): only the .git places the approval
        # named may be written, whatever a swap does meanwhile.
        # The agents' state (.codex, .agents, the homes) stays read-only with writable_git too,
        # as the sandbox keeps it for commands (sec4's review).
        protect_git = sandbox.mode is SandboxMode.READ_ONLY or (
            sandbox.mode is SandboxMode.WORKSPACE_WRITE and not sandbox.writable_git)
        protect_state = sandbox.mode is not SandboxMode.DANGER_FULL_ACCESS
        return await apply_patch(patch_text, workspace, protect_git=protect_git, protect_state=protect_state,
                                 approved_git=plan.git)

    # -- asking ------------------------------------------------------------------------------

    def turn_ended(self, turn_id: int) -> None:
        """Withdraw the open requests of ``turn_id``: each denies its call."""
        for scope in self._pending.pop(turn_id, set()):
            scope.cancel()

    def _request(self, kind: ApprovalKind, call_id: str, turn_id: int | None, cwd: Path, reason: str,
                 **fields: Any) -> ApprovalRequest:
        from ..._base.approval_request import ApprovalRequest  # loaded by the first request

        approval_id = f"approval-{self._next_id}"
        self._next_id += 1
        return ApprovalRequest(kind, approval_id, call_id, turn_id, cwd, reason, session_id=self._session_id, **fields)

    async def _decide(self, request: ApprovalRequest) -> ApprovalDecision:
        """The hook's approval, or ``_Denied``; an ``abort`` also cancels the turn."""
        decision, source, error = await self._ask(request)
        if decision in _APPROVED:
            return decision
        if decision is ApprovalDecision.ABORT and request.turn_id is not None:
            self._cancel_turn(request.turn_id)
            raise _Denied("the user denied it and aborted the turn")
        why = _DENIED_BECAUSE[source].format(timeout=self._approvals.timeout, error=error)
        raise _Denied(why)

    async def _ask(self, request: ApprovalRequest) -> tuple[ApprovalDecision, str, str | None]:
        hook = self._approvals.hook
        assert hook is not None  # Approvals refuses a policy that asks without a hook
        self._emit(EventKind.APPROVAL_REQUESTED, request.to_json(), request.turn_id)
        withdraw = trio.CancelScope()
        if request.turn_id is not None:
            self._pending.setdefault(request.turn_id, set()).add(withdraw)
        decision, source, error = ApprovalDecision.DENY, "hook", None
        try:
            with withdraw, trio.move_on_after(self._approvals.timeout) as timer:
                try:
                    answer: object = await hook(request)
                except Exception as exc:  # a failing hook denies; Cancelled propagates
                    answer, source, error = None, "error", _describe(exc)
                if isinstance(answer, ApprovalDecision):
                    decision = answer
                elif source == "hook":
                    source, error = "error", f"it returned {answer!r:.200}, not a ta.ApprovalDecision"
            if timer.cancelled_caught:
                source = "timeout"
            elif withdraw.cancelled_caught:
                source = "withdrawn"
        except BaseException:
            self._resolved(request, ApprovalDecision.DENY, "cancelled", None)
            raise
        finally:
            if request.turn_id is not None:
                self._pending.get(request.turn_id, set()).discard(withdraw)
        if source != "hook":
            decision = ApprovalDecision.DENY
        self._resolved(request, decision, source, error)
        return decision, source, error

    def _resolved(self, request: ApprovalRequest, decision: ApprovalDecision, source: str, error: str | None) -> None:
        payload: dict[str, Any] = {"approval_id": request.approval_id, "call_id": request.call_id,
                                   "decision": decision.value, "source": source}
        if error is not None:
            payload["error"] = error
        self._emit(EventKind.APPROVAL_RESOLVED, payload, request.turn_id)


def _describe(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = "<unprintable>"
    return f"{type(exc).__name__}: {message}"[:500]
