"""Model-visible definitions of the built-in tools (our own wording).

``exec`` is a custom tool whose input is JavaScript, with an optional first-line
pragma ``// @exec: {...}`` (Lark grammar below); its description lists every nested
tool with a TypeScript-style declaration rendered from its JSON schema so the model
knows how to call it (nanocodex 5.1). Which nested built-ins are listed depends on
the ``Tools`` options: the workspace tools always, ``web__run`` unless web search is
off, ``image_gen__imagegen`` when image generation is on, ``tool_search`` (and a
section on the servers) when MCP servers are configured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._record import Record
from ._ts import declaration, js_identifier, ts_type

__all__ = [
    "BUILTIN_NAMES",
    "IMAGE_GENERATION",
    "NESTED_BUILTINS",
    "PLAN_DESCRIPTION",
    "TOOL_SEARCH",
    "UPDATE_PLAN_PARAMETERS",
    "WEB_RUN_DESCRIPTION",
    "WEB_RUN_PARAMETERS",
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


_EXEC_COMMAND_PARAMETERS = {
    "type": "object",
    "properties": {
        "cmd": {"type": "string", "description": "The shell command."},
        "workdir": {"type": "string", "description": "Directory to run in (default: the workspace)."},
        "shell": {"type": "string"},
        "login": {"type": "boolean", "description": "Run a login shell (default true)."},
        "yield_time_ms": {"type": "number", "description": "Return after this long if still running."},
        "max_output_tokens": {"type": "number"},
    },
    "required": ["cmd"],
}
_WRITE_STDIN_PARAMETERS = {
    "type": "object",
    "properties": {
        "session_id": {"type": "number"},
        "chars": {"type": "string", "description": 'Empty to poll for output; "\\u0003" interrupts.'},
        "yield_time_ms": {"type": "number"},
        "max_output_tokens": {"type": "number"},
    },
    "required": ["session_id"],
}
_SHELL_RESULT = "{ output: string; exit_code?: number; wall_time_seconds: number; session_id?: number }"
_VIEW_IMAGE_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The image file, relative to the workspace."},
        "detail": {"type": "string", "enum": ["high", "original"]},
    },
    "required": ["path"],
    "additionalProperties": False,
}
_TOOL_SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Words describing the tool you need."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 32, "description": "At most this many (default 8)."},
    },
    "required": ["query"],
    "additionalProperties": False,
}
_IMAGE_RESULT = '{ type: "input_image"; image_url: string; detail?: string }'


# ``update_plan`` and ``web__run``: their descriptions, and their parameters as the
# JSON schemas ``_plan.plan_schema()`` and ``_web_search.commands_schema()`` derive from
# the TypedDicts that validate a call (tests/tools/test_nested_schemas.py holds them
# equal, key order included). Written out so that listing the tools at agent start
# imports neither module nor builds their shapes; the first call does.
PLAN_DESCRIPTION = (
    "Record the plan for the task and its progress, for the user to follow: a list of short "
    "steps, each pending, in_progress or completed (at most one in_progress at a time). Each "
    'call replaces the whole plan. Resolves to "Plan updated".'
)
WEB_RUN_DESCRIPTION = (
    "Search and read the web. Pass one object of commands; use several in one call to get more "
    'at once, e.g. {search_query: [{q: "bitcoin news"}], finance: [{ticker: "BTC", type: "crypto", '
    'market: ""}]}. Results cite reference ids (turn0search0, ...) that `open`, `click` and `find` take. '
    "At most 4 search queries per call, and 4 need response_length medium or long. Write only the "
    "fields you need. Resolves to the result text."
)
UPDATE_PLAN_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string", "description": "Why the plan changed, if it did."},
        "plan": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "step": {"type": "string", "description": "What to do, in a few words."},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                },
                "required": ["step", "status"],
                "additionalProperties": False,
            },
            "description": "Every step, in order.",
        },
    },
    "required": ["plan"],
    "additionalProperties": False,
}
WEB_RUN_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "search_query": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "q": {"type": "string", "description": "The search query."},
                    "recency": {"type": "integer", "description": "Only results from the last N days."},
                    "domains": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Only results from these domains.",
                    },
                },
                "required": ["q"],
                "additionalProperties": False,
            },
            "description": "Web searches (at most 4 per call).",
        },
        "image_query": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "q": {"type": "string", "description": "The search query."},
                    "recency": {"type": "integer", "description": "Only results from the last N days."},
                    "domains": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Only results from these domains.",
                    },
                },
                "required": ["q"],
                "additionalProperties": False,
            },
            "description": "Image searches (source pages and captions).",
        },
        "open": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "ref_id": {
                        "type": "string",
                        "description": "A reference id from earlier results (e.g. turn0search0) or a URL.",
                    },
                    "lineno": {"type": "integer", "description": "The line to open the page at."},
                },
                "required": ["ref_id"],
                "additionalProperties": False,
            },
            "description": "Open pages by reference id or URL.",
        },
        "click": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "ref_id": {"type": "string", "description": "The page whose numbered link to follow."},
                    "id": {"type": "integer", "description": "The number of the link."},
                },
                "required": ["ref_id", "id"],
                "additionalProperties": False,
            },
            "description": "Follow numbered links of opened pages.",
        },
        "find": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "ref_id": {"type": "string", "description": "The page (reference id or URL) to search in."},
                    "pattern": {"type": "string", "description": "The text to find."},
                },
                "required": ["ref_id", "pattern"],
                "additionalProperties": False,
            },
            "description": "Find text in pages.",
        },
        "finance": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "ticker": {"type": "string"},
                    "type": {"type": "string", "enum": ["equity", "fund", "crypto", "index"]},
                    "market": {
                        "type": "string",
                        "description": "ISO 3166-1 alpha-3 country code, \"OTC\", or \"\" for crypto.",
                    },
                },
                "required": ["ticker", "type"],
                "additionalProperties": False,
            },
            "description": "Prices of stocks, funds, crypto or indices.",
        },
        "weather": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "Like \"Country, Area, City\"."},
                    "start": {"type": "string", "description": "YYYY-MM-DD; default today."},
                    "duration": {"type": "integer", "description": "Number of days; default 7."},
                },
                "required": ["location"],
                "additionalProperties": False,
            },
            "description": "Weather forecasts.",
        },
        "sports": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "fn": {"type": "string", "enum": ["schedule", "standings"]},
                    "league": {
                        "type": "string",
                        "enum": ["nba", "wnba", "nfl", "nhl", "mlb", "epl", "ncaamb", "ncaawb", "ipl"],
                    },
                    "team": {"type": "string", "description": "The team's 3-4 letter broadcast alias."},
                    "opponent": {"type": "string"},
                    "date_from": {"type": "string", "description": "YYYY-MM-DD."},
                    "date_to": {"type": "string", "description": "YYYY-MM-DD."},
                    "num_games": {"type": "integer"},
                    "locale": {"type": "string"},
                },
                "required": ["fn", "league"],
                "additionalProperties": False,
            },
            "description": "Sports schedules and standings.",
        },
        "time": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"utc_offset": {"type": "string", "description": "Like \"+03:00\"."}},
                "required": ["utc_offset"],
                "additionalProperties": False,
            },
            "description": "The time at UTC offsets.",
        },
        "response_length": {
            "type": "string",
            "enum": ["short", "medium", "long"],
            "description": "How much text to return.",
        },
    },
    "required": [],
    "additionalProperties": False,
}


def builtin_nested_tools(*, web_search: bool, image_generation: bool, tool_search: bool) -> list[NestedTool]:
    """The nested built-ins for these options, in description order."""
    tools = [
        NestedTool(
            "exec_command",
            "Run a shell command in the workspace. Returns {output, exit_code, wall_time_seconds} or, "
            "if still running after yield_time_ms, a session_id.",
            _EXEC_COMMAND_PARAMETERS, _SHELL_RESULT,
        ),
        NestedTool(
            "write_stdin",
            "Write characters to a running exec_command session (empty chars polls for output).",
            _WRITE_STDIN_PARAMETERS, _SHELL_RESULT,
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
            _VIEW_IMAGE_PARAMETERS, _IMAGE_RESULT,
        ),
    ]
    if web_search:
        tools.append(NestedTool(WEB_SEARCH, WEB_RUN_DESCRIPTION, WEB_RUN_PARAMETERS, "string"))
    if image_generation:
        from ._image_gen import IMAGEGEN_DESCRIPTION, imagegen_schema

        tools.append(NestedTool(IMAGE_GENERATION, IMAGEGEN_DESCRIPTION, imagegen_schema(), _IMAGE_RESULT))
    if tool_search:
        tools.append(NestedTool(
            TOOL_SEARCH,
            "Find tools of the MCP servers (BM25 over names, descriptions and parameters) and make them "
            "callable. Each result has the tool's name, description and TypeScript declaration.",
            _TOOL_SEARCH_PARAMETERS,
            "{ tools: { name: string; server: string; tool: string; description: string; declaration: string; "
            "input_schema: object; output_schema?: object }[]; pending_servers: string[]; "
            "failed_servers: { [server: string]: string } }",
        ))
    return tools


def _mcp_section(servers: Sequence[tuple[str, str | None]]) -> str:
    lines = [f"- `{name}`" + (f": {' '.join(text.split())}" if text else "") for name, text in servers]
    return (
        "## MCP servers\n"
        "Tools of these MCP servers are called as `tools.mcp__<server>__<tool>(args)` and resolve to a "
        "`CallToolResult` (a failed call rejects). The servers start in the background, so their tools "
        "are not declared here: `tools.tool_search({query})` finds them (waiting for servers still "
        "starting) and makes them callable in this and later cells; `ALL_TOOLS` lists what is callable "
        "now. Pass an image block of a result to `image(...)` to show it.\n"
        + "\n".join(lines) + "\n" + _CALL_TOOL_RESULT
    )


def exec_definition(
    nested: Sequence[NestedTool], *, web_search: bool = True, mcp_servers: Sequence[tuple[str, str | None]] = ()
) -> dict[str, Any]:
    text = EXEC_DESCRIPTION + "\n" + (_WEB_ON if web_search else _WEB_OFF)
    if mcp_servers:
        text += "\n" + _mcp_section(mcp_servers)
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
