"""Model-visible definitions of the built-in tools (our own wording).

``exec`` is a custom tool whose input is JavaScript, with an optional first-line
pragma ``// @exec: {...}`` (Lark grammar below); its description lists every nested
tool with a TypeScript-style declaration rendered from its JSON schema so the model
knows how to call it (nanocodex 5.1). Which nested built-ins are listed depends on
the ``Tools`` options: the workspace tools always, ``web__run`` unless web search is
off, ``image_gen__imagegen`` when image generation is on, ``tool_search`` and the
resource and prompt tools (``_mcp_resources``), and a section on the servers, when MCP
servers are configured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._record import Record
from ._nested_parameters import (
    EXEC_COMMAND_PARAMETERS,
    IMAGE_RESULT,
    MCP_GET_PROMPT_PARAMETERS,
    MCP_LISTING_PARAMETERS,
    MCP_READ_PARAMETERS,
    PLAN_DESCRIPTION,
    SHELL_RESULT,
    TOOL_SEARCH_PARAMETERS,
    UPDATE_PLAN_PARAMETERS,
    VIEW_IMAGE_PARAMETERS,
    WEB_RUN_DESCRIPTION,
    WEB_RUN_PARAMETERS,
    WRITE_STDIN_PARAMETERS,
)
from ._ts import declaration, js_identifier, ts_type

__all__ = [
    "BUILTIN_NAMES",
    "GET_PROMPT",
    "IMAGE_GENERATION",
    "LIST_PROMPTS",
    "LIST_RESOURCES",
    "LIST_TEMPLATES",
    "MAX_LISTED_MCP_TOOLS",
    "MCP_RESOURCE_TOOLS",
    "NESTED_BUILTINS",
    "READ_RESOURCE",
    "TOOL_SEARCH",
    "WEB_SEARCH",
    "NestedTool",
    "builtin_nested_tools",
    "exec_definition",
    "wait_definition",
]

BUILTIN_NAMES = frozenset({"exec", "wait"})
WEB_SEARCH = "web__run"
IMAGE_GENERATION = "image_gen__imagegen"
TOOL_SEARCH = "tool_search"
LIST_RESOURCES = "list_mcp_resources"
LIST_TEMPLATES = "list_mcp_resource_templates"
READ_RESOURCE = "read_mcp_resource"
LIST_PROMPTS = "list_mcp_prompts"
GET_PROMPT = "get_mcp_prompt"
MCP_RESOURCE_TOOLS = frozenset({LIST_RESOURCES, LIST_TEMPLATES, READ_RESOURCE, LIST_PROMPTS, GET_PROMPT})
# The nested built-ins that are always on with the built-in tools.
NESTED_BUILTINS = frozenset({"exec_command", "write_stdin", "apply_patch", "update_plan", "view_image"})

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
- `image(dataUrl, detail?)`: add an image; `detail` is auto|low|high|original. It also \
takes an `{image_url, detail?}` object (what `tools.view_image` returns) or an MCP image block.
- `notify(value)`: send a short progress note to the model as a separate output.
- `yield_control()`: return the output so far now; the script keeps running and \
`wait({cell_id})` collects the rest.
- `exit()`: end the script successfully.
- `store(key, value)` / `load(key)`: keep JSON values across exec calls.
- `setTimeout(fn, ms)` / `clearTimeout(id)`.
- `ALL_TOOLS`: the list of `{name, description}` of every host tool callable now.

An optional first line `// @exec: {"yield_time_ms": 10000, "max_output_tokens": 10000}` \
sets how long to wait before yielding and how much output to return.
"""

_WEB_ON = "Web search runs through `tools.web__run` (below).\n"
_WEB_OFF = (
    "Web search (`web__run`) is turned off for this agent; use `tools.exec_command` for local work.\n"
)

_CALL_TOOL_RESULT = """\
```ts
type ContentBlock =
  | { type: "text"; text: string }
  | { type: "image"; data: string; mimeType: string }
  | { type: "audio"; data: string; mimeType: string }
  | { type: "resource_link"; uri: string; name: string; mimeType?: string }
  | { type: "resource"; resource: { uri: string; mimeType?: string; text?: string; blob?: string } };
type CallToolResult<TStructured = { [key: string]: unknown }> = {
  content: ContentBlock[]; structuredContent?: TStructured; isError?: boolean; _meta?: object;
};
```
"""


class NestedTool(Record):
    """A tool reached as ``tools.<name>(...)`` from ``exec``: its section of the
    description and its ``ALL_TOOLS`` entry. ``parameters`` is None for a freeform
    (string input) tool."""

    __slots__ = ("name", "description", "parameters", "output")  # noqa: RUF023  # field order

    def __init__(
        self, name: str, description: str, parameters: Mapping[str, object] | None, output: str = "unknown"
    ) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters
        self.output = output

    @property
    def is_function(self) -> bool:
        return self.parameters is not None

    def section(self) -> str:
        js_name = js_identifier(self.name)
        heading = f"`{js_name}`" + (f" ({self.name})" if js_name != self.name else "")
        input_type = ts_type(self.parameters, top=True, fallback="object") if self.parameters is not None else ""
        decl = declaration(self.name, input_type, self.output, freeform=self.parameters is None)
        return f"### {heading}\n{self.description}\n```ts\n{decl}\n```\n"


def builtin_nested_tools(*, web_search: bool, image_generation: bool, tool_search: bool) -> list[NestedTool]:
    """The nested built-ins for these options, in description order."""
    tools = [
        NestedTool(
            "exec_command",
            "Run a shell command in the workspace. Returns {output, exit_code, wall_time_seconds} or, "
            "if still running after yield_time_ms, a session_id.",
            EXEC_COMMAND_PARAMETERS, SHELL_RESULT,
        ),
        NestedTool(
            "write_stdin",
            "Write characters to a running exec_command session (empty chars polls for output).",
            WRITE_STDIN_PARAMETERS, SHELL_RESULT,
        ),
        NestedTool(
            "apply_patch",
            "Edit files with a patch in the `*** Begin Patch` format (Add File, Delete File, "
            "Update File with @@ hunks, Move to). Paths are relative to the workspace.",
            None, "string",
        ),
        NestedTool("update_plan", PLAN_DESCRIPTION, UPDATE_PLAN_PARAMETERS, "string"),
        NestedTool(
            "view_image",
            "Load an image file of the workspace (PNG, JPEG, GIF or WebP, at most 20 MiB). Pass the "
            "result to `image(...)` to look at it.",
            VIEW_IMAGE_PARAMETERS, IMAGE_RESULT,
        ),
    ]
    if web_search:
        tools.append(NestedTool(WEB_SEARCH, WEB_RUN_DESCRIPTION, WEB_RUN_PARAMETERS, "string"))
    if image_generation:
        from ._image_gen import IMAGEGEN_DESCRIPTION, imagegen_schema

        tools.append(NestedTool(
            IMAGE_GENERATION, IMAGEGEN_DESCRIPTION, imagegen_schema(),
            '{ type: "input_image"; image_url: string; output_hint?: string }',
        ))
    if tool_search:
        tools.append(NestedTool(
            TOOL_SEARCH,
            "Find tools of the MCP servers (BM25 over names, descriptions and parameters) and make them "
            "callable. Each result has the tool's name, description and TypeScript declaration.",
            TOOL_SEARCH_PARAMETERS,
            "{ tools: { name: string; server: string; tool: string; description: string; declaration: string; "
            "input_schema: object; output_schema?: object }[]; pending_servers: string[]; "
            "failed_servers: { [server: string]: string } }",
        ))
        tools.extend(_mcp_resource_tools())
    return tools


_PAGE = "nextCursor?: string; truncated?: boolean; failed_servers?: { [server: string]: string }"


def _mcp_resource_tools() -> list[NestedTool]:
    """The MCP resource and prompt tools, codex's three and two for prompts (``_mcp_resources``)."""
    return [
        NestedTool(LIST_RESOURCES, "List the resources (files, documents, data) of one MCP server or of all; "
                   "read one with read_mcp_resource.", MCP_LISTING_PARAMETERS,
                   "{ server?: string; resources: { server: string; uri: string; name: string; "
                   f"mimeType?: string; description?: string }}[]; {_PAGE} }}"),
        NestedTool(LIST_TEMPLATES, "List the resource templates (URI patterns such as file:///{path}) of one MCP "
                   "server or of all; fill one in and read it with read_mcp_resource.", MCP_LISTING_PARAMETERS,
                   "{ server?: string; resourceTemplates: { server: string; uriTemplate: string; name: string; "
                   f"description?: string }}[]; {_PAGE} }}"),
        NestedTool(READ_RESOURCE, "Read a resource of an MCP server by its URI.", MCP_READ_PARAMETERS,
                   "{ server: string; uri: string; contents: { uri: string; mimeType?: string; text?: string; "
                   "blob?: string; truncated?: boolean; omitted?: string }[] }"),
        NestedTool(LIST_PROMPTS, "List the prompts (message templates) of one MCP server or of all.",
                   MCP_LISTING_PARAMETERS,
                   "{ server?: string; prompts: { server: string; name: string; description?: string; "
                   f"arguments?: {{ name: string; required?: boolean }}[] }}[]; {_PAGE} }}"),
        NestedTool(GET_PROMPT, "Get a prompt of an MCP server, filled in with its arguments.",
                   MCP_GET_PROMPT_PARAMETERS,
                   "{ server: string; name: string; description?: string; "
                   "messages: { role: string; content: ContentBlock }[] }"),
    ]


#: The active MCP tools ``exec``'s description lists, and the length of each one's line.
MAX_LISTED_MCP_TOOLS = 32
MAX_MCP_TOOL_LINE = 160


def _one_line(text: str | None, limit: int) -> str:
    """The first sentence of ``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join((text or "").split())
    head, dot, _ = flat.partition(". ")
    line = head + dot.strip()
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."


def _active_tools_section(tools: Sequence[tuple[str, str | None]]) -> str:
    """The MCP tools callable now (``McpTools.active_tools``), bounded (see
    ``_tools/__init__.Tools.definitions`` for when this list is sent)."""
    lines = []
    for name, description in tools[:MAX_LISTED_MCP_TOOLS]:
        line = f"- `tools.{js_identifier(name)}`"
        summary = _one_line(description, MAX_MCP_TOOL_LINE - len(line) - 2)
        lines.append(line + (f": {summary}" if summary else ""))
    more = len(tools) - MAX_LISTED_MCP_TOOLS
    if more > 0:
        lines.append(f"- ... and {more} more: `ALL_TOOLS` lists them all, `tools.tool_search` describes them")
    return (
        "### Active MCP tools\nCallable now without a search (their declarations: `tools.tool_search`):\n"
        + "\n".join(lines) + "\n"
    )


def _mcp_section(servers: Sequence[tuple[str, str | None]], tools: Sequence[tuple[str, str | None]] = ()) -> str:
    lines = [f"- `{name}`" + (f": {' '.join(text.split())}" if text else "") for name, text in servers]
    return (
        "## MCP servers\n"
        "Tools of these MCP servers are called as `tools.mcp__<server>__<tool>(args)` and resolve to a "
        "`CallToolResult` (a failed call rejects). The servers start in the background, so their tools "
        "are not declared here: `tools.tool_search({query})` finds them (waiting for servers still "
        "starting) and makes them callable in this and later cells; `ALL_TOOLS` lists what is callable "
        "now. Pass an image block of a result to `image(...)` to show it. Their resources and prompts are "
        "listed and read with `tools.list_mcp_resources`, `tools.read_mcp_resource`, `tools.list_mcp_prompts` "
        "and the like (below).\n"
        + "\n".join(lines) + "\n" + (_active_tools_section(tools) if tools else "") + _CALL_TOOL_RESULT
    )


def exec_definition(
    nested: Sequence[NestedTool], *, web_search: bool = True, mcp_servers: Sequence[tuple[str, str | None]] = (),
    mcp_tools: Sequence[tuple[str, str | None]] = (),
) -> dict[str, Any]:
    """``exec``'s definition; ``mcp_tools``: ``(name, description)`` of the MCP tools
    active now, listed (bounded) in the MCP section."""
    text = EXEC_DESCRIPTION + "\n" + (_WEB_ON if web_search else _WEB_OFF)
    if mcp_servers:
        text += "\n" + _mcp_section(mcp_servers, mcp_tools)
    text += "\n## Host tools\n" + "\n".join(tool.section() for tool in nested)
    return {
        "type": "custom",
        "name": "exec",
        "description": text,
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
