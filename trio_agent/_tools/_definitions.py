"""Model-visible definitions of the built-in tools (our own wording).

``exec`` is a custom tool whose input is JavaScript, with an optional first-line
pragma ``// @exec: {...}`` (Lark grammar below); its description lists every nested
tool with a TypeScript-ish signature so the model knows how to call it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import ToolSpec

__all__ = ["BUILTIN_NAMES", "NESTED_BUILTINS", "exec_definition", "wait_definition"]

BUILTIN_NAMES = frozenset({"exec", "wait"})
NESTED_BUILTINS = frozenset({"exec_command", "write_stdin", "apply_patch"})

EXEC_GRAMMAR = r"""start: pragma_source | plain_source
pragma_source: PRAGMA_LINE NEWLINE SOURCE
plain_source: SOURCE
PRAGMA_LINE: /[ \t]*\/\/ @exec:[^\r\n]*/
NEWLINE: /\r?\n/
SOURCE: /[\s\S]+/
"""

EXEC_DESCRIPTION = """\
Run JavaScript (an async function body, so top-level `await` works) in a sandboxed \
QuickJS engine. There is no filesystem, network or process access from JavaScript \
itself: everything goes through the host tools on the `tools` object, each returning \
a Promise. Independent calls can run concurrently with `Promise.all`.

Globals:
- `text(value)`: add text to the output (non-strings are JSON-encoded).
- `image(dataUrl, detail?)`: add an image; `detail` is auto|low|high|original.
- `notify(value)`: send a short progress note to the model as a separate output.
- `yield_control()`: return the output so far now; the script keeps running and \
`wait({cell_id})` collects the rest.
- `exit()`: end the script successfully.
- `store(key, value)` / `load(key)`: keep JSON values across exec calls.
- `setTimeout(fn, ms)` / `clearTimeout(id)`.
- `ALL_TOOLS`: the list of `{name, description}` of every host tool.

An optional first line `// @exec: {"yield_time_ms": 10000, "max_output_tokens": 10000}` \
sets how long to wait before yielding and how much output to return.

Network tools such as `web__run` are not part of this runtime unless the host \
registers them; use `tools.exec_command` for local work.

## Host tools
"""

_NESTED_DOCS = [
    (
        "exec_command",
        "Run a shell command in the workspace. Returns {output, exit_code, "
        "wall_time_seconds} or, if still running after yield_time_ms, a session_id.",
        "{cmd: string, workdir?: string, shell?: string, login?: boolean, "
        "yield_time_ms?: number, max_output_tokens?: number}",
    ),
    (
        "write_stdin",
        "Write characters to a running exec_command session (empty chars polls for "
        'output; "\\u0003" interrupts).',
        "{session_id: number, chars?: string, yield_time_ms?: number, max_output_tokens?: number}",
    ),
    (
        "apply_patch",
        "Edit files with a patch in the `*** Begin Patch` format (Add File, Delete File, "
        "Update File with @@ hunks, Move to). Paths are relative to the workspace.",
        "string",
    ),
]


def _section(name: str, description: str, signature: str) -> str:
    return (
        f"### `{name}`\n{description}\n"
        f"```ts\ndeclare const tools: {{ {name}(args: {signature}): Promise<unknown>; }}\n```\n"
    )


def exec_definition(user_tools: Sequence[ToolSpec] = ()) -> dict[str, Any]:
    sections = [_section(*doc) for doc in _NESTED_DOCS]
    for spec in user_tools:
        signature = "string" if spec.kind == "custom" else "object"
        sections.append(_section(spec.name, spec.description, signature))
    return {
        "type": "custom",
        "name": "exec",
        "description": EXEC_DESCRIPTION + "\n".join(sections),
        "format": {"type": "grammar", "syntax": "lark", "definition": EXEC_GRAMMAR},
    }


def wait_definition() -> dict[str, Any]:
    return {
        "type": "function",
        "name": "wait",
        "description": (
            "Wait for a running exec cell (one that returned `Script running with cell ID N`) "
            "and return what it produced since, or its final output."
        ),
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {
                "cell_id": {"type": "string", "description": "The cell ID to wait for."},
                "yield_time_ms": {
                    "type": "number",
                    "description": "How long to wait before returning (default 10000).",
                },
                "max_tokens": {
                    "type": "number",
                    "description": "Output budget in tokens (default 10000).",
                },
                "terminate": {
                    "type": "boolean",
                    "description": "Stop the cell instead of waiting for it.",
                },
            },
            "required": ["cell_id"],
            "additionalProperties": False,
        },
    }
