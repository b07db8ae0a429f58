"""Which tool calls are protocol items, and their fields (pure but for one look-up of
the user's shell, at construction).

One item per action, as codex shows them (issue 22 item 4). The ``exec`` cell and the
``wait`` call are plumbing -- JavaScript that the model wrote to make calls -- and
are not items: what a client sees are the calls the cell makes, each as the item its
kind has in the schema:

- ``exec_command`` -> ``commandExecution`` with the command line the shell runs
  (``/bin/bash -lc '<cmd>'``, as codex shows it; ``commandActions`` has the bare
  command), ``cwd`` and ``source: unifiedExecStartup``. A command still running when
  its call returns keeps its item open: the ``write_stdin`` calls that feed it show
  as ``item/commandExecution/terminalInteraction`` and output deltas of that item,
  which ends with the call that sees the process exit (``TurnMapper``). A
  ``write_stdin`` to a session whose item is not open in this turn (started in an
  earlier turn) is an item of its own, ``source: unifiedExecInteraction``, showing
  the session's command;
- ``apply_patch`` -> ``fileChange`` (its changes parsed from the patch, each with a
  unified diff; a patch that does not parse shows no changes and fails);
- an MCP tool (``mcp__<server>__<tool>``) -> ``mcpToolCall`` with its server and the
  tool's own name (from the ``tool.call`` event), its arguments, its result content
  or error;
- ``web__run`` -> ``webSearch`` (the query, and the action: search, open page, find
  in page, or other);
- ``view_image`` -> ``imageView``;
- a dynamic tool (client-run) -> ``dynamicToolCall``.

``update_plan`` is not an item: its ``plan.updated`` event is ``turn/plan/updated``.
Other calls (user tools, ``tool_search``, unsupported calls) are not shown.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
from typing import Any

from .._tools._patch_parse import FileChange, PatchError, parse_patch

__all__ = ["ToolItems", "file_changes", "mcp_content", "text_of", "web_search"]

Json = dict[str, Any]
_WEB_SEARCH = "web__run"


def text_of(result: object) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, list):
        # a part's text is the tool's data: anything but a string (a hostile null) is no text
        return "".join(text for part in result if isinstance(part, dict) and isinstance(text := part.get("text"), str))
    return json.dumps(result)


def _default_shell() -> str:
    from .._tools._shell_env import resolve_shell  # what exec_command runs without a `shell` argument

    return resolve_shell(None, os.environ.get("SHELL"))


class ToolItems:
    """One thread's tool items; remembers each running shell session's command so a
    later ``write_stdin`` to it shows that command."""

    def __init__(self, cwd: str, dynamic_tools: frozenset[str], shell: str | None = None) -> None:
        self.cwd = cwd
        self.dynamic_tools = dynamic_tools
        self.shell = shell if shell is not None else _default_shell()
        self._commands: dict[int, tuple[str, str]] = {}  # shell session id -> its command line and command

    def started(self, payload: Json) -> Json | None:
        """The item a ``tool.call`` starts, or None for calls the protocol does not show."""
        call_id, tool, args = payload.get("call_id"), payload.get("tool"), payload.get("arguments")
        if not isinstance(call_id, str) or not isinstance(tool, str):
            return None
        if tool in self.dynamic_tools:
            return {"type": "dynamicToolCall", "id": call_id, "tool": tool, "namespace": None, "arguments": args,
                    "status": "inProgress", "contentItems": None, "success": None, "durationMs": None}
        if "/" not in call_id:  # the exec cell and wait: not items (the module docstring)
            return None
        if tool == "exec_command" and isinstance(args, dict):
            return self._exec_item(call_id, args)
        if tool == "write_stdin" and isinstance(args, dict):
            return self.stdin_item(call_id, args)
        if tool == "apply_patch" and isinstance(args, str):
            return {"type": "fileChange", "id": call_id, "changes": file_changes(args), "status": "inProgress"}
        if tool.startswith("mcp__"):
            return _mcp_item(call_id, tool, args, payload)
        if tool == _WEB_SEARCH:
            return {"type": "webSearch", "id": call_id, **web_search(args)}
        if tool == "view_image" and isinstance(args, dict) and isinstance(args.get("path"), str) and args["path"]:
            return {"type": "imageView", "id": call_id, "path": os.path.join(self.cwd, args["path"])}
        return None

    def _exec_item(self, call_id: str, args: Json) -> Json:
        cmd = str(args.get("cmd", ""))
        given = args.get("shell")
        shell = given if isinstance(given, str) and given else self.shell
        login = args.get("login") is not False
        workdir = args.get("workdir")
        cwd = os.path.join(self.cwd, workdir) if isinstance(workdir, str) and workdir else self.cwd
        line = shlex.join([shell, "-lc" if login else "-c", cmd])
        return _command_item(call_id, line, cmd, cwd, None, "unifiedExecStartup")

    def stdin_item(self, call_id: str, args: Json) -> Json:
        """A ``write_stdin`` shown on its own (its session's item is not open)."""
        session = args.get("session_id")
        line, action = self._commands.get(session, ("write_stdin",) * 2) if isinstance(session, int) else (
            "write_stdin", "write_stdin")
        return _command_item(call_id, line, action, self.cwd, str(session) if session is not None else None,
                             "unifiedExecInteraction")

    def command_outcome(self, payload: Json) -> Json:
        """``status``, ``aggregatedOutput`` (this call's output), ``exitCode`` (and
        ``processId`` while the process runs) of a finished shell call."""
        result, ok = payload.get("result"), payload.get("status") == "completed"
        try:
            parsed = json.loads(result) if isinstance(result, str) else None
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):  # the call failed: its result is the error text
            return {"status": "failed", "aggregatedOutput": text_of(result), "exitCode": None}
        exit_code = parsed.get("exit_code")
        session = parsed.get("session_id")
        fields: Json = {"aggregatedOutput": str(parsed.get("output", "")),
                        "exitCode": exit_code if isinstance(exit_code, int) else None}
        fields["status"] = "completed" if ok and exit_code in (None, 0) else "failed"
        if isinstance(session, int):
            fields["processId"] = str(session)
        return fields

    def note_session(self, process_id: str, item: Json) -> None:
        """``item``'s command is still running as session ``process_id``: a ``write_stdin``
        to it shown on its own shows that command."""
        if process_id.isdigit():
            self._commands[int(process_id)] = (item["command"], item["commandActions"][0]["command"])


def _command_item(call_id: str, line: str, action: str, cwd: str, process_id: str | None, source: str) -> Json:
    return {
        "type": "commandExecution", "id": call_id, "pluginId": None, "scriptPath": None, "command": line,
        "cwd": cwd, "processId": process_id, "source": source, "status": "inProgress",
        "commandActions": [{"type": "unknown", "command": action}], "aggregatedOutput": None, "exitCode": None,
        "durationMs": None,
    }


def _mcp_item(call_id: str, tool: str, args: object, payload: Json) -> Json:
    server, name = payload.get("mcp_server"), payload.get("mcp_tool")
    if not isinstance(server, str) or not isinstance(name, str):  # not a listed tool: its name says what it can
        server, _, name = tool.removeprefix("mcp__").partition("__")
    return {"type": "mcpToolCall", "id": call_id, "server": server, "tool": name, "status": "inProgress",
            "arguments": args, "result": None, "error": None, "durationMs": None}


def mcp_content(result: object) -> list[Json]:
    """A nested MCP result (its content as ``input_text``/``input_image`` items) as MCP
    content blocks again (``McpToolCallResult.content``)."""
    blocks: list[Json] = []
    for item in result if isinstance(result, list) else [{"type": "input_text", "text": text_of(result)}]:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "input_text":
            blocks.append({"type": "text", "text": str(item.get("text", ""))})
        elif kind == "input_image" and isinstance(item.get("image_url"), str):
            head, _, data = item["image_url"].partition(",")
            mime = head.removeprefix("data:").removesuffix(";base64") or "application/octet-stream"
            blocks.append({"type": "image", "data": data, "mimeType": mime})
    return blocks


def web_search(args: object) -> Json:
    """``query`` and ``action`` of a ``web__run`` call's commands (``{search_query:
    [{q}], open: [{ref_id}], find: [{ref_id, pattern}], ...}``; JSON text is read too)."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = None
    commands = args if isinstance(args, dict) else {}
    queries = [entry["q"] for key in ("search_query", "image_query") for entry in _entries(commands, key)
               if isinstance(entry.get("q"), str)]
    if queries:
        return {"query": queries[0], "action": {"type": "search", "query": queries[0], "queries": queries}}
    opened = _entries(commands, "open")
    if opened and isinstance(opened[0].get("ref_id"), str):
        return {"query": opened[0]["ref_id"], "action": {"type": "openPage", "url": opened[0]["ref_id"]}}
    found = _entries(commands, "find")
    if found and isinstance(found[0].get("pattern"), str):
        url = found[0].get("ref_id") if isinstance(found[0].get("ref_id"), str) else None
        return {"query": found[0]["pattern"], "action": {"type": "findInPage", "url": url,
                                                          "pattern": found[0]["pattern"]}}
    return {"query": "", "action": {"type": "other"}}


def _entries(commands: Json, key: str) -> list[Json]:
    value = commands.get(key)
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def file_changes(patch: str) -> list[Json]:
    """``FileUpdateChange`` objects of a patch (``[]`` when it does not parse)."""
    try:
        parsed = parse_patch(patch)
    except PatchError:
        return []
    return [{"path": change.path, "kind": _change_kind(change), "diff": _diff(change)} for change in parsed.changes]


def _change_kind(change: FileChange) -> Json:
    if change.kind == "update":
        return {"type": "update", "move_path": change.move_to}
    return {"type": change.kind}


def _diff(change: FileChange) -> str:
    """The new content of an added file; a unified diff of an update's hunks; nothing
    for a deletion (the file's content is not read here)."""
    if change.kind == "add":
        return "".join(f"{line}\n" for line in change.new_lines)
    if change.kind == "delete":
        return ""
    lines: list[str] = []
    for hunk in change.hunks:
        header = [f"@@ {hunk.header} @@"] if hunk.header else ["@@"]
        old, new = list(hunk.old_lines), list(hunk.new_lines)
        body = difflib.unified_diff(old, new, lineterm="", n=len(old))  # one hunk: its context whole
        lines += header + [line for line in list(body)[2:] if not line.startswith("@@")]
    return "\n".join(lines) + ("\n" if lines else "")
