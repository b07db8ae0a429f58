"""Which tool calls are protocol items, and their fields (pure): the ``exec`` and ``wait``
calls and the ``exec_command``/``write_stdin`` calls inside a cell are
``commandExecution`` items; ``apply_patch`` inside a cell is a ``fileChange`` (its
changes parsed from the patch, each with a unified diff; a patch that does not parse
shows no changes and fails); a dynamic tool (client-run) is a ``dynamicToolCall``.
Other calls (user tools inside a cell, unsupported calls) are not shown.
"""

from __future__ import annotations

import difflib
import json
import os
from typing import Any

from .._tools._patch_parse import FileChange, PatchError, parse_patch

__all__ = ["ToolItems", "file_changes", "text_of"]

Json = dict[str, Any]
_COMMAND_TOOLS = ("exec_command", "write_stdin")


def text_of(result: object) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, list):
        return "".join(part.get("text", "") for part in result if isinstance(part, dict))
    return json.dumps(result)


class ToolItems:
    """One thread's tool items; remembers each running shell session's command so a
    later ``write_stdin`` to it shows that command."""

    def __init__(self, cwd: str, dynamic_tools: frozenset[str]) -> None:
        self.cwd = cwd
        self.dynamic_tools = dynamic_tools
        self._commands: dict[int, str] = {}  # shell session id -> its command

    def started(self, payload: Json) -> Json | None:
        """The item a ``tool.call`` starts, or None for calls the protocol does not show."""
        call_id, tool, args = payload.get("call_id"), payload.get("tool"), payload.get("arguments")
        if not isinstance(call_id, str) or not isinstance(tool, str):
            return None
        nested = "/" in call_id
        if tool in self.dynamic_tools:
            return {"type": "dynamicToolCall", "id": call_id, "tool": tool, "namespace": None, "arguments": args,
                    "status": "inProgress", "contentItems": None, "success": None, "durationMs": None}
        if not nested and tool in ("exec", "wait"):
            command = args if isinstance(args, str) else f"wait {json.dumps(args)}"
            return self._command_item(call_id, command, self.cwd, None, "agent")
        if nested and tool in _COMMAND_TOOLS and isinstance(args, dict):
            return self._shell_item(call_id, tool, args)
        if nested and tool == "apply_patch" and isinstance(args, str):
            return {"type": "fileChange", "id": call_id, "changes": file_changes(args), "status": "inProgress"}
        return None

    def _shell_item(self, call_id: str, tool: str, args: Json) -> Json:
        if tool == "exec_command":
            workdir = args.get("workdir")
            cwd = os.path.join(self.cwd, workdir) if isinstance(workdir, str) and workdir else self.cwd
            return self._command_item(call_id, str(args.get("cmd", "")), cwd, None, "agent")
        session = args.get("session_id")
        command = self._commands.get(session, "write_stdin") if isinstance(session, int) else "write_stdin"
        return self._command_item(call_id, command, self.cwd, str(session) if session is not None else None,
                                  "unifiedExecInteraction")

    @staticmethod
    def _command_item(call_id: str, command: str, cwd: str, process_id: str | None, source: str) -> Json:
        return {
            "type": "commandExecution", "id": call_id, "command": command, "cwd": cwd, "processId": process_id,
            "source": source, "status": "inProgress", "commandActions": [{"type": "unknown", "command": command}],
            "aggregatedOutput": None, "exitCode": None, "durationMs": None,
        }

    def command_outcome(self, payload: Json) -> Json:
        """``status``, ``aggregatedOutput``, ``exitCode`` (and ``processId``) of a finished call."""
        tool, result, status = payload.get("tool"), payload.get("result"), payload.get("status")
        ok = status == "completed"
        if tool not in _COMMAND_TOOLS:
            return {"status": "completed" if ok else "failed", "aggregatedOutput": text_of(result),
                    "exitCode": 0 if ok else 1}
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

    def note_session(self, process_id: str, command: str) -> None:
        """An ``exec_command`` left its process running: ``write_stdin`` to it shows its command."""
        if process_id.isdigit():
            self._commands[int(process_id)] = command


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
