"""The request prefix and the first-turn context messages (pure builders).

Prefix (shared by warmup and every full replay, SPEC sec. 2):
  0. ``additional_tools`` (developer) with the tool definitions; never an ``id``;
  1. developer message with the instructions.
First-turn history (sent with the first generation):
  2. developer message with the runtime/permissions text;
  3. user message with the ``AGENTS.md`` instructions (when any) and the
     ``<environment_context>`` block.
The text here is trio_agent's own wording; the structure follows the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "INSTRUCTIONS_ID",
    "TURN_ABORTED_TEXT",
    "additional_tools_item",
    "environment_message",
    "instructions_message",
    "permissions_message",
    "user_message",
]

INSTRUCTIONS_ID = "msg_trio-agent-instructions"

DEFAULT_INSTRUCTIONS = """\
You are a coding agent running inside trio_agent, working in the user's workspace.

Work in small, verifiable steps. Use the `exec` tool to run JavaScript that calls the \
host tools (`tools.exec_command` for shell commands, `tools.apply_patch` for edits); \
read files before changing them, keep changes minimal and consistent with the code \
around them, and check your work by running it. When something fails, read the \
error and fix the cause rather than the symptom.

Be concise. Report what you changed, how you verified it, and anything left undone. \
Never invent command output or file contents."""

PERMISSIONS_TEXT = """\
<permissions instructions>
Filesystem sandboxing: `sandbox_mode` is `danger-full-access`: commands run without a \
filesystem sandbox and network access is enabled.
Approval policy is `never`: commands run without asking the user. Do not request \
escalated permissions; there is nobody to approve them.
</permissions instructions>"""

TURN_ABORTED_TEXT = (
    "<turn_aborted>\nThe user interrupted the previous turn on purpose. Any running "
    "processes of that turn were stopped. If any tools or commands were aborted, they "
    "may have partially executed.\n</turn_aborted>"
)


def escape(text: str) -> str:
    """XML-escape ``&``, ``<`` and ``>`` (what the context block needs)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _text_message(role: str, *texts: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": role,
        "content": [{"type": "input_text", "text": text} for text in texts],
    }


def additional_tools_item(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "additional_tools", "role": "developer", "tools": list(tools)}


def instructions_message(text: str) -> dict[str, Any]:
    message = _text_message("developer", text)
    return {"type": "message", "id": INSTRUCTIONS_ID, **{k: v for k, v in message.items() if k != "type"}}


def permissions_message() -> dict[str, Any]:
    return _text_message("developer", PERMISSIONS_TEXT)


def user_message(text: str) -> dict[str, Any]:
    return _text_message("user", text)


def environment_message(
    *,
    cwd: str,
    shell: str,
    current_date: str,
    timezone: str,
    agents_md: str | None = None,
) -> dict[str, Any]:
    """The user context message: AGENTS.md instructions (if any) then the environment."""
    texts: list[str] = []
    if agents_md:
        texts.append(
            f"# AGENTS.md instructions for {cwd}\n\n<INSTRUCTIONS>\n{agents_md}\n</INSTRUCTIONS>"
        )
    root = escape(cwd)
    texts.append(
        "<environment_context>\n"
        f"  <cwd>{root}</cwd>\n"
        f"  <shell>{escape(shell)}</shell>\n"
        f"  <current_date>{escape(current_date)}</current_date>\n"
        f"  <timezone>{escape(timezone)}</timezone>\n"
        "  <filesystem><workspace_roots><root>"
        f"{root}</root></workspace_roots>"
        '<permission_profile type="disabled"><file_system type="unrestricted" />'
        "</permission_profile></filesystem>\n"
        "</environment_context>"
    )
    return _text_message("user", *texts)
