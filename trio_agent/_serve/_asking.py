"""The server asks its clients: a dynamic tool call (``item/tool/call``) and an approval
(``docs/app-server.md`` "Approvals and sandboxes") go to the subscribers of the thread
whose agent asked, and the first answer wins.

Ordering: neither request goes before the notifications that introduce what it names
-- the call's ``item/started``, the approval's item and status -- which the pump sends
(``_pump``): the question waits until the pump has introduced it (``wait_introduced``).
Every client asked is told when the question is resolved by another, or abandoned
(cancelled by a timeout or the turn's end).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from .._base.approval_request import ApprovalRequest
from .._tools._security import ApprovalDecision
from ._approvals import APPROVAL_METHODS, ApprovalUnanswered, decision_of, request_params
from ._connection import PendingReply
from ._context import ServerContext
from ._dynamic import failure, parse_reply
from ._jsonrpc import RpcError
from ._outs import DynamicOutcome, Out
from ._reviewer import AUTO_REVIEW_RATIONALE, auto_review_notifications, is_automatic
from ._thread_state import ThreadState

__all__ = ["ClientQuestions"]


class ClientQuestions:
    """The questions ``server``'s agents ask its clients (see the module docstring)."""

    def __init__(self, server: ServerContext) -> None:
        self._server = server

    # -- dynamic tools -------------------------------------------------------------------

    def asker(self, thread_id: str) -> Callable[[str, Any, str], Any]:
        """How the dynamic tools of thread ``thread_id``'s agent run: by its clients."""

        async def ask(call_id: str, arguments: Any, tool: str) -> DynamicOutcome:
            state = self._server.state(thread_id)
            if state is None:
                await trio.lowlevel.checkpoint()
                return failure(f"dynamic tool {tool} could not run: thread {thread_id} is not served")
            turn_id = await state.calls.wait_introduced(call_id)
            outcome = await self._ask_subscribers(state, call_id, turn_id, tool, arguments)
            state.calls.outcomes[call_id] = outcome
            return outcome

        return ask

    async def _ask_subscribers(self, state: ThreadState, call_id: str, turn_id: str, tool: str,
                               arguments: Any) -> DynamicOutcome:
        targets = [conn for conn in state.subscribers if conn.initialized and not conn.closed]
        if not targets:
            return failure(f"dynamic tool {tool} could not run: no client is subscribed to thread "
                           f"{state.thread_id} to answer item/tool/call")
        pending = PendingReply(state.thread_id)
        params = {"threadId": state.thread_id, "turnId": turn_id, "callId": call_id, "namespace": None,
                  "tool": tool, "arguments": arguments}
        for conn in targets:
            conn.ask("item/tool/call", params, pending)
        try:
            result = await pending.wait()
        except RpcError as exc:
            return failure(f"dynamic tool {tool} failed: {exc.message}")
        finally:
            pending.abandon()  # the others who were asked are told it is resolved
        return parse_reply(result)

    # -- approvals -----------------------------------------------------------------------

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Every served agent's approval hook: the clients of the thread that asks decide."""
        server = self._server
        method = APPROVAL_METHODS[request.kind]
        state = server.state(request.session_id or "")
        if state is None:
            raise ApprovalUnanswered(f"{method}: thread {request.session_id} is not served")
        if request.turn_id is None:
            raise ApprovalUnanswered(f"{method} needs a turn to ask in; this call's cell outlived its turn")
        try:
            turn_id = await state.gate.wait_introduced(request.approval_id)
            if is_automatic(state.meta.approvals_reviewer):  # _reviewer: the server reviews, and denies
                shown = state.mapper.open_item(request.call_id)  # the item the review names
                for name, params in auto_review_notifications(state.thread_id, turn_id, request, server.now_ms(),
                                                              shown):
                    server.publish(state, [Out(name, params)])
                raise ApprovalUnanswered(AUTO_REVIEW_RATIONALE)
            result = await self._ask_for_approval(state, method, turn_id, request)
        finally:
            state.gate.forget(request.approval_id)
        return decision_of(request.kind, result)

    async def _ask_for_approval(self, state: ThreadState, method: str, turn_id: str, request: ApprovalRequest) -> Any:
        targets = [conn for conn in state.subscribers if conn.initialized and not conn.closed]
        if not targets:
            raise ApprovalUnanswered(f"no client is subscribed to thread {state.thread_id} to answer {method}")
        pending = PendingReply(state.thread_id)
        shown = state.mapper.open_item(request.call_id)  # the item the request names
        params = request_params(state.thread_id, turn_id, request, self._server.now_ms(), shown)
        for conn in targets:
            conn.ask(method, params, pending)
        try:
            return await pending.wait()  # an error reply or every client gone: RpcError, a denial
        finally:
            pending.abandon()  # cancelled (timeout, turn ended): each client asked is told it is resolved
