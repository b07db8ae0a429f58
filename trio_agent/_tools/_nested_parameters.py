"""The parameters and result types of the nested built-in tools, written out.

What ``exec``'s description declares for each tool its JavaScript calls as
``tools.<name>(...)`` (``_definitions.builtin_nested_tools`` renders the TypeScript
from these JSON schemas). A module of its own: the schemas are long, and the
descriptions around them (``_definitions``) read better without them.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EXEC_COMMAND_PARAMETERS",
    "IMAGE_RESULT",
    "MCP_GET_PROMPT_PARAMETERS",
    "MCP_LISTING_PARAMETERS",
    "MCP_READ_PARAMETERS",
    "PLAN_DESCRIPTION",
    "SHELL_RESULT",
    "TOOL_SEARCH_PARAMETERS",
    "UPDATE_PLAN_PARAMETERS",
    "VIEW_IMAGE_PARAMETERS",
    "WEB_RUN_DESCRIPTION",
    "WEB_RUN_PARAMETERS",
    "WRITE_STDIN_PARAMETERS",
]

_TERMINAL_SIZE: dict[str, Any] = {  # codex's {rows, cols}
    "type": "object",
    "properties": {"rows": {"type": "integer"}, "cols": {"type": "integer"}},
    "required": ["rows", "cols"],
    "additionalProperties": False,
}
EXEC_COMMAND_PARAMETERS = {
    "type": "object",
    "properties": {
        "cmd": {"type": "string", "description": "The shell command."},
        "workdir": {"type": "string", "description": "Directory to run in (default: the workspace)."},
        "shell": {"type": "string"},
        "login": {"type": "boolean", "description": "Run a login shell (default true)."},
        "tty": {
            "type": "boolean",
            "description": "Run on a pseudo-terminal (default false): for programs that need one "
            "(password prompts, REPLs, curses). Output lines then end in \\r\\n and input is echoed.",
        },
        "size": {**_TERMINAL_SIZE, "description": "The terminal's size with tty: true (default 24 rows, 80 columns)."},
        "yield_time_ms": {"type": "number", "description": "Return after this long if still running."},
        "max_output_tokens": {"type": "number"},
    },
    "required": ["cmd"],
}
WRITE_STDIN_PARAMETERS = {
    "type": "object",
    "properties": {
        "session_id": {"type": "number"},
        "chars": {"type": "string", "description": 'Empty to poll for output; "\\u0003" interrupts.'},
        "size": {**_TERMINAL_SIZE, "description": "Resize the terminal of a tty: true session first."},
        "yield_time_ms": {"type": "number"},
        "max_output_tokens": {"type": "number"},
    },
    "required": ["session_id"],
    "additionalProperties": False,
}
SHELL_RESULT = "{ output: string; exit_code?: number; wall_time_seconds: number; session_id?: number }"
VIEW_IMAGE_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The image file, relative to the workspace."},
        "detail": {"type": "string", "enum": ["high", "original"]},
    },
    "required": ["path"],
    "additionalProperties": False,
}
TOOL_SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Words describing the tool you need."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 32, "description": "At most this many (default 8)."},
    },
    "required": ["query"],
    "additionalProperties": False,
}
IMAGE_RESULT = '{ type: "input_image"; image_url: string; detail?: string }'


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
WEB_RUN_DESCRIPTION = """\
Search and read the web. Pass one object of commands; several commands (and several
items of one command) in one call come back together, faster than one call each, e.g.
{search_query: [{q: "bitcoin news"}], finance: [{ticker: "BTC", type: "crypto", market: ""}]}.
- search_query / image_query: [{q, recency?, domains?}] (image_query finds pages with images and
  their captions, not the images). At most 4 queries per call; 4 need response_length medium or long.
- open: [{ref_id, lineno?}] a result (ref_id like turn0search0) or a URL; click: [{ref_id, id}] a
  numbered link of an open page; find: [{ref_id, pattern}] text in an open page.
- finance, weather, sports, time: quotes, forecasts, schedules and standings, the time at a UTC offset.
Write only the fields you need (no empty lists or nulls); response_length sets how much text
comes back. Resolves to the result text.

When to browse: do what the user says about searching, either way. Otherwise search whenever
what you would rely on may have changed or you are not sure of it -- news, prices, versions of
software libraries and their APIs, laws and standards, schedules, who holds a role, anything
niche or recent -- and when the user wants sources, quotes or links, names a page or document
you have not seen, or the stakes are high (medical, legal, financial). When in doubt, search:
a search costs seconds, a stale fact costs the answer. For technical questions rely on primary
sources (official documentation, specifications, source code, papers); say when a conclusion is
your inference rather than what a source states.

Citing: the reference ids in results (turn0search0, turn1fetch2) are only for open, click and
find; never show them in the answer. Cite each claim a web source supports with a Markdown link
to the page that supports it -- [a descriptive title](https://example.com/page) -- placed right
after the claim (after its punctuation), not on a line of its own, not gathered at the end, not
inside code blocks, and never to a search results page or as a bare URL. Prefer primary and
authoritative sources, from different sites where that helps. Quote sparingly: at most about 25
words verbatim from one source, and keep within a source's "[wordlim N]" label (200 words if it
has none); summarise and paraphrase the rest.
"""
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
_QUERY: dict[str, Any] = {  # one web or image search
    "type": "object",
    "properties": {
        "q": {"type": "string", "description": "The search query."},
        "recency": {"type": "integer", "description": "Only results from the last N days."},
        "domains": {"type": "array", "items": {"type": "string"}, "description": "Only results from these domains."},
    },
    "required": ["q"],
    "additionalProperties": False,
}
WEB_RUN_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "search_query": {
            "type": "array",
            "items": _QUERY,
            "description": "Web searches (at most 4 per call).",
        },
        "image_query": {
            "type": "array",
            "items": _QUERY,
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

# The MCP resource and prompt tools (``_mcp_resources`` runs them).
_SERVER = {"type": "string", "description": "The MCP server's name."}
MCP_LISTING_PARAMETERS = {
    "type": "object",
    "properties": {
        "server": _SERVER,
        "cursor": {"type": "string", "description": "The nextCursor of the previous page (needs server)."},
    },
    "additionalProperties": False,
}
MCP_READ_PARAMETERS = {
    "type": "object",
    "properties": {"server": _SERVER, "uri": {"type": "string", "description": "The resource's URI."}},
    "required": ["server", "uri"],
    "additionalProperties": False,
}
MCP_GET_PROMPT_PARAMETERS = {
    "type": "object",
    "properties": {
        "server": _SERVER,
        "name": {"type": "string", "description": "The prompt's name."},
        "arguments": {"type": "object", "additionalProperties": {"type": "string"},
                      "description": "The prompt's arguments, by name."},
    },
    "required": ["server", "name"],
    "additionalProperties": False,
}
