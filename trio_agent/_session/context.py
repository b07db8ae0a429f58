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
    "request_prefix",
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

_SANDBOX_TEXT = {
    "danger-full-access": "`sandbox_mode` is `danger-full-access`: commands run without a filesystem "
    "sandbox, with your full rights, and network access is enabled.",
    "workspace-write": "`sandbox_mode` is `workspace-write`: commands can read every file but write only "
    "in {writable}; everything else is read-only{git}.",
    "read-only": "`sandbox_mode` is `read-only`: commands can read files but write none, not even in the "
    "workspace or /tmp, and `apply_patch` needs the user's approval.",
}
_APPROVAL_TEXT = {
    "never": "Approval policy is `never`: nothing is ever put to the user. Do not request escalated "
    "permissions; there is nobody to approve them.",
    "on-request": "Approval policy is `on-request`: commands run in the sandbox without asking. To run a "
    'command outside the sandbox, call exec_command with `sandbox_permissions: "require_escalated"` and '
    "a one-sentence `justification` the user will see; the user approves or denies it. Ask only when the "
    "sandbox is what stands in the way.",
    "on-failure": "Approval policy is `on-failure`: commands run in the sandbox; when one fails the way a "
    "sandbox denial looks, the user is asked whether to run it again outside the sandbox.",
    "untrusted": "Approval policy is `untrusted`: known read-only commands (ls, cat, grep, git status, ...) "
    "run at once; every other command and every `apply_patch` waits for the user's approval.",
}
_UNCONFINED_APPROVAL = (
    "Approval policy is `{policy}`: there is no sandbox to leave, so commands run without asking the user."
)


def _permissions_text(
    sandbox_mode: str, approval_policy: str, network: bool, writable_roots: Sequence[str], writable_git: bool
) -> str:
    confined = sandbox_mode != "danger-full-access"
    places = ["the workspace", "a /tmp private to this session", *writable_roots]
    writable = ", ".join(places[:-1]) + " and " + places[-1]
    git = "" if writable_git else ", and so is `.git`"
    sandbox = _SANDBOX_TEXT[sandbox_mode].format(writable=writable, git=git)
    if confined:
        sandbox += " Network access is " + (
            "enabled." if network else "disabled: no connection works, not even to 127.0.0.1 on the host."
        )
    approval = _APPROVAL_TEXT[approval_policy]
    if not confined and approval_policy != "untrusted":
        approval = _UNCONFINED_APPROVAL.format(policy=approval_policy)
    elif confined and approval_policy == "never":
        approval += " When the sandbox blocks something, work within it or say what you could not do."
    return f"<permissions instructions>\nFilesystem sandboxing: {sandbox}\n{approval}\n</permissions instructions>"


PERMISSIONS_TEXT = _permissions_text("danger-full-access", "never", True, (), True)

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


def request_prefix(
    tool_definitions: Sequence[dict[str, Any]], instructions: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The shared prefix: the ``additional_tools`` item, then the instructions message
    (``instructions``, or the built-in default when ``None``)."""
    return additional_tools_item(tool_definitions), instructions_message(instructions or DEFAULT_INSTRUCTIONS)


def permissions_message(
    sandbox_mode: str = "danger-full-access",
    approval_policy: str = "never",
    *,
    network: bool = True,
    writable_roots: Sequence[str] = (),
    writable_git: bool = False,
) -> dict[str, Any]:
    """The developer message telling the model its sandbox mode and approval policy
    (codex's names; ``network`` and the writable places as the agent enforces them)."""
    text = _permissions_text(sandbox_mode, approval_policy, network, writable_roots, writable_git)
    return _text_message("developer", text)


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
