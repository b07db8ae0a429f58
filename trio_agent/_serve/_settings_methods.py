"""The configuration a codex front end reads at start-up: ``config/read``,
``configRequirements/read``, ``hooks/list``, ``skills/list``, ``collaborationMode/list``.

Theory of operation (issue 22). The codex TUI stops at start-up without the first two
(and ``account/read``); the others it shows. Each answer says what is true of this
server and nothing it does not have:

- ``config/read``: the server's thread defaults in codex's ``config.toml`` key names --
  ``model``, ``model_provider``, ``model_reasoning_effort``, ``model_context_window``,
  ``approval_policy``, ``sandbox_mode`` (the mode asked for; a machine without a working
  sandbox runs ``danger-full-access``, which each thread's responses report) and
  ``approvals_reviewer`` ``"user"``. They come from the command line, not from a codex
  config layer, so ``origins`` is empty (and ``layers``, when asked for, too). ``cwd`` is
  accepted and changes nothing: there are no project layers.
- ``configRequirements/read``: what the server accepts, as requirements -- the approval
  policies (``untrusted``, ``on-request``, ``never``: no ``on-failure``, no granular
  policies), the three sandbox modes, and both reviewers (``_reviewer``).
- ``hooks/list``, ``skills/list``: this server runs no hooks and has no skills, so each
  directory asked about (``cwds``; else, for ``hooks/list``, the ``threadId``'s
  workspace; else the server's) has an empty entry.
- ``collaborationMode/list`` (experimental): no collaboration-mode presets (no plan
  mode): ``{data: []}``.
- ``plugin/installed``, ``plugin/list``, ``app/list``, ``mcpServerStatus/list`` (the TUI
  asks for the first at start-up): this server has no plugin marketplaces, apps
  (connectors) or MCP servers for its threads, so each list is empty.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .._config import context_window
from .._tools._security import SandboxMode
from ._connection import Connection, Reply
from ._jsonrpc import InvalidParams
from ._params import Params, shown
from ._permissions import approval_json
from ._reviewer import REVIEWERS

if TYPE_CHECKING:
    from ._context import ServerContext

__all__ = ["METHODS"]

Json = dict[str, Any]


def _config(server: ServerContext) -> Json:
    config = server.config
    sandbox = config.sandbox.mode if config.sandbox is not None else SandboxMode.WORKSPACE_WRITE
    return {
        "model": config.model,
        "model_provider": server.model_provider,
        "model_reasoning_effort": config.thinking.value,
        "model_context_window": context_window(config.model),
        "approval_policy": approval_json(config.approval.policy),
        "sandbox_mode": sandbox.value,
        "approvals_reviewer": "user",
    }


async def config_read(server: ServerContext, conn: Connection, params: Params) -> Reply:
    params.opt_string("cwd")
    layers = params.opt_bool("includeLayers")
    return Reply({"config": _config(server), "origins": {}, "layers": [] if layers else None})


async def config_requirements_read(server: ServerContext, conn: Connection, params: Params) -> Reply:
    requirements = {
        "allowedApprovalPolicies": ["untrusted", "on-request", "never"],
        "allowedSandboxModes": [mode.value for mode in SandboxMode],
        "allowedApprovalsReviewers": [reviewer for reviewer in REVIEWERS if reviewer != "guardian_subagent"],
    }
    return Reply({"requirements": requirements})


def _directories(server: ServerContext, params: Params, *, by_thread: bool = False) -> list[str]:
    """``cwds`` asked about, else (``hooks/list``) the named thread's workspace, else the server's."""
    cwds = params.opt_list("cwds") or []
    if not all(isinstance(cwd, str) and cwd for cwd in cwds):
        raise InvalidParams(f"{params.method}: `cwds` must be an array of directory paths, got {shown(cwds)}")
    if cwds:
        return list(dict.fromkeys(cwds))
    thread_id = params.opt_string("threadId") if by_thread else None
    state = server.state(thread_id) if thread_id else None
    if state is not None:
        return [state.meta.cwd]
    return [os.path.realpath(server.config.resolved_workspace())]


async def hooks_list(server: ServerContext, conn: Connection, params: Params) -> Reply:
    return Reply({"data": [{"cwd": cwd, "hooks": [], "warnings": [], "errors": []}
                           for cwd in _directories(server, params, by_thread=True)]})


async def skills_list(server: ServerContext, conn: Connection, params: Params) -> Reply:
    params.opt_bool("forceReload")
    return Reply({"data": [{"cwd": cwd, "skills": [], "errors": []} for cwd in _directories(server, params)]})


async def collaboration_mode_list(server: ServerContext, conn: Connection, params: Params) -> Reply:
    return Reply({"data": []})


async def plugin_installed(server: ServerContext, conn: Connection, params: Params) -> Reply:
    params.opt_list("cwds")
    return Reply({"marketplaces": [], "marketplaceLoadErrors": []})


async def plugin_list(server: ServerContext, conn: Connection, params: Params) -> Reply:
    params.opt_list("cwds")
    return Reply({"marketplaces": [], "marketplaceLoadErrors": [], "featuredPluginIds": []})


async def empty_page(server: ServerContext, conn: Connection, params: Params) -> Reply:
    params.opt_string("cursor")
    params.opt_int("limit")
    return Reply({"data": [], "nextCursor": None})


METHODS = {
    "config/read": config_read,
    "configRequirements/read": config_requirements_read,
    "hooks/list": hooks_list,
    "skills/list": skills_list,
    "collaborationMode/list": collaboration_mode_list,
    "plugin/installed": plugin_installed,
    "plugin/list": plugin_list,
    "app/list": empty_page,
    "mcpServerStatus/list": empty_page,
}
