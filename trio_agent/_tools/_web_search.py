"""``web__run``: remote web search through the Responses API's search endpoint.

The tool takes a JSON object of *commands* (``search_query``, ``image_query``,
``open``, ``click``, ``find``, ``finance``, ``weather``, ``sports``, ``time``, plus
``response_length``) and POSTs ``{api_base_url}/alpha/search`` with the body
nanocodex sends (``reference/nanocodex.md`` 5.3): ``{id: session id, model, input:
recent conversation, commands, settings: {allowed_callers: ["direct"],
external_web_access: true}, max_output_tokens}``, with the same auth headers as the
model calls. Each ``sports`` operation beyond the first goes in a request of its own
(the endpoint answers one per request), sharing the output budget.

Limits: the whole call is bounded by 45 s on Trio's clock; each request gets 2
attempts (a connection failure or a 5xx is retried after 0.2 s); a response body
over 1 MiB is refused. Failures of any kind are a failed tool result, never an
exception out of the agent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import trio

from ._nested_parameters import WEB_RUN_DESCRIPTION
from ._remote import RemoteApi, RemoteError
from ._schema import Shape
from ._tool_errors import InvalidToolArguments, NestedToolError

__all__ = [
    "SEARCH_ATTEMPTS",
    "SEARCH_TIMEOUT",
    "WEB_RUN_DESCRIPTION",
    "commands_schema",
    "recent_input",
    "run_web_search",
]

SEARCH_TIMEOUT = 45.0
SEARCH_ATTEMPTS = 2
RETRY_DELAY = 0.2
MAX_RESPONSE_BYTES = 1 << 20
DEFAULT_OUTPUT_TOKENS = 10_000
_ASSISTANT_CONTEXT_TOKENS = 1_000


class SearchQuery(TypedDict):
    q: Annotated[str, "The search query."]
    recency: NotRequired[Annotated[int, "Only results from the last N days."]]
    domains: NotRequired[Annotated[list[str], "Only results from these domains."]]


class OpenOperation(TypedDict):
    ref_id: Annotated[str, "A reference id from earlier results (e.g. turn0search0) or a URL."]
    lineno: NotRequired[Annotated[int, "The line to open the page at."]]


class ClickOperation(TypedDict):
    ref_id: Annotated[str, "The page whose numbered link to follow."]
    id: Annotated[int, "The number of the link."]


class FindOperation(TypedDict):
    ref_id: Annotated[str, "The page (reference id or URL) to search in."]
    pattern: Annotated[str, "The text to find."]


class FinanceOperation(TypedDict):
    ticker: str
    type: Literal["equity", "fund", "crypto", "index"]
    market: NotRequired[Annotated[str, 'ISO 3166-1 alpha-3 country code, "OTC", or "" for crypto.']]


class WeatherOperation(TypedDict):
    location: Annotated[str, 'Like "Country, Area, City".']
    start: NotRequired[Annotated[str, "YYYY-MM-DD; default today."]]
    duration: NotRequired[Annotated[int, "Number of days; default 7."]]


class SportsOperation(TypedDict):
    fn: Literal["schedule", "standings"]
    league: Literal["nba", "wnba", "nfl", "nhl", "mlb", "epl", "ncaamb", "ncaawb", "ipl"]
    team: NotRequired[Annotated[str, "The team's 3-4 letter broadcast alias."]]
    opponent: NotRequired[str]
    date_from: NotRequired[Annotated[str, "YYYY-MM-DD."]]
    date_to: NotRequired[Annotated[str, "YYYY-MM-DD."]]
    num_games: NotRequired[int]
    locale: NotRequired[str]


class TimeOperation(TypedDict):
    utc_offset: Annotated[str, 'Like "+03:00".']


class SearchCommands(TypedDict, total=False):
    search_query: Annotated[list[SearchQuery], "Web searches (at most 4 per call)."]
    image_query: Annotated[list[SearchQuery], "Image searches (source pages and captions)."]
    open: Annotated[list[OpenOperation], "Open pages by reference id or URL."]
    click: Annotated[list[ClickOperation], "Follow numbered links of opened pages."]
    find: Annotated[list[FindOperation], "Find text in pages."]
    finance: Annotated[list[FinanceOperation], "Prices of stocks, funds, crypto or indices."]
    weather: Annotated[list[WeatherOperation], "Weather forecasts."]
    sports: Annotated[list[SportsOperation], "Sports schedules and standings."]
    time: Annotated[list[TimeOperation], "The time at UTC offsets."]
    response_length: Annotated[Literal["short", "medium", "long"], "How much text to return."]


_OPERATIONS = ("search_query", "image_query", "open", "click", "find", "finance", "weather", "sports", "time")


_shape: Shape | None = None


def _commands_shape() -> Shape:
    global _shape
    if _shape is None:
        _shape = Shape(SearchCommands, "tool 'web__run'")
    return _shape


def commands_schema() -> dict[str, Any]:
    return _commands_shape().schema


def _check(arguments: object) -> dict[str, Any]:
    """The validated commands, or ``NestedToolError`` saying what is wrong."""
    if isinstance(arguments, str):  # freeform JSON text is accepted too
        if not arguments.strip():
            raise NestedToolError("web__run requires at least one command, e.g. {search_query: [{q: \"...\"}]}")
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise NestedToolError(f"web__run arguments are not JSON: {exc}") from None
    try:
        commands = _commands_shape().validate(arguments)
    except InvalidToolArguments as exc:
        raise NestedToolError(f"invalid arguments for web__run: {exc}") from None
    assert isinstance(commands, dict)
    if not any(commands.get(name) for name in _OPERATIONS):
        raise NestedToolError("web__run requires at least one command, e.g. {search_query: [{q: \"...\"}]}")
    queries = len(commands.get("search_query", []))
    if queries > 4:
        raise NestedToolError(f"web__run accepts at most 4 search queries per call; got {queries}")
    if queries > 3 and commands.get("response_length") not in ("medium", "long"):
        raise NestedToolError("web__run needs response_length medium or long when sending 4 search queries")
    return commands


def _requests(commands: dict[str, Any]) -> list[dict[str, Any]]:
    """One request per sports operation (the first carries everything else); the wire
    form of a sports operation names its tool."""
    sports = [{"tool": "sports", **op} for op in commands.pop("sports", [])]
    first = dict(commands)
    if sports:
        first["sports"] = sports[:1]
    requests = [first]
    for op in sports[1:]:
        extra: dict[str, Any] = {"sports": [op]}
        if "response_length" in commands:
            extra["response_length"] = commands["response_length"]
        requests.append(extra)
    return requests


# -- recent conversation ---------------------------------------------------------------


def _is_context(text: str) -> bool:
    text = text.lstrip()
    return text.startswith("# AGENTS.md instructions for ") or text.startswith("<environment_context>")


def _visible(item: Mapping[str, Any]) -> dict[str, Any] | None:
    if item.get("type") != "message" or item.get("role") not in ("user", "assistant"):
        return None
    content = item.get("content")
    if not isinstance(content, list):
        return None
    if item["role"] == "user":
        texts = [p for p in content if isinstance(p, dict) and p.get("type") == "input_text"]
        if not texts or all(_is_context(str(p.get("text", ""))) for p in texts):
            return None
        return {"type": "message", "role": "user", "content": texts}
    parts = [dict(p) for p in content if isinstance(p, dict) and p.get("type") == "output_text"]
    return {"type": "message", "role": "assistant", "content": parts} if parts else None


def _truncate_middle(text: str, tokens: int) -> str:
    limit = tokens * 4
    if len(text) <= limit:
        return text
    removed = (len(text) - limit + 3) // 4
    return f"{text[: limit // 2]}…{removed} tokens truncated…{text[len(text) - (limit - limit // 2):]}"


def recent_input(history: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """The conversation the search sees: the messages from the second-to-last user
    message to the last one (context messages and non-text parts dropped, ids removed),
    with at most ~1,000 tokens of assistant text; None when there is no user message."""
    messages = [m for m in (_visible(item) for item in history) if m is not None]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if not users:
        return None
    messages = messages[users[-2] if len(users) > 1 else users[-1]: users[-1] + 1]
    budget = _ASSISTANT_CONTEXT_TOKENS
    kept = []
    for message in messages:
        if message["role"] == "assistant":
            parts = []
            for part in message["content"]:
                if budget <= 0:
                    break
                text = str(part.get("text", ""))
                cost = (len(text) + 3) // 4
                part["text"] = text if cost <= budget else _truncate_middle(text, budget)
                budget -= min(cost, budget)
                parts.append(part)
            if not parts:
                continue
            message["content"] = parts
        kept.append(message)
    return kept or None


# -- the call ------------------------------------------------------------------------


def _semantic_error(output: str) -> bool:
    return any(
        line.strip().startswith(("Error parsing function call:", "Found no tool response."))
        or line.strip() == "Internal Error ()"
        for line in output.splitlines()
    )


async def _search(remote: RemoteApi, body: dict[str, Any]) -> str:
    for attempt in range(1, SEARCH_ATTEMPTS + 1):
        try:
            response = await remote.post_json("/alpha/search", body, limit=MAX_RESPONSE_BYTES)
        except RemoteError as exc:
            if exc.retryable and attempt < SEARCH_ATTEMPTS:
                await trio.sleep(RETRY_DELAY)
                continue
            raise NestedToolError(str(exc)) from None
        if response.status >= 500 and attempt < SEARCH_ATTEMPTS:
            await trio.sleep(RETRY_DELAY)
            continue
        if not 200 <= response.status < 300:
            raise NestedToolError(f"web search returned HTTP {response.status}: {response.preview()}")
        try:
            decoded = json.loads(response.body)
        except ValueError as exc:
            raise NestedToolError(f"web search returned a body that is not JSON: {exc}") from None
        output = decoded.get("output") if isinstance(decoded, dict) else None
        if not isinstance(output, str):
            raise NestedToolError("web search returned a body without an `output` string")
        return output
    raise NestedToolError("web search exhausted its attempts")  # pragma: no cover - the loop returns or raises


async def run_web_search(
    remote: RemoteApi, arguments: object, history: Iterable[Mapping[str, Any]], *,
    output_tokens: int = DEFAULT_OUTPUT_TOKENS,
) -> str:
    """Run one ``web__run`` call; returns the search output text or raises ``NestedToolError``."""
    commands = _check(arguments)
    requests = _requests(commands)
    conversation = recent_input(history)
    outputs: list[str] = []
    failures: list[str] = []
    with trio.move_on_after(SEARCH_TIMEOUT) as scope:
        for index, request_commands in enumerate(requests):
            share, extra = divmod(output_tokens, len(requests))
            body: dict[str, Any] = {"id": remote.session_id, "model": remote.model}
            if conversation is not None:
                body["input"] = conversation
            body["commands"] = request_commands
            body["settings"] = {"allowed_callers": ["direct"], "external_web_access": True}
            body["max_output_tokens"] = max(1, share + (1 if index < extra else 0))
            try:
                output = await _search(remote, body)
            except NestedToolError as exc:
                failures.append(f"web search request {index + 1} failed: {exc}" if len(requests) > 1 else str(exc))
                continue
            if _semantic_error(output):
                failures.append(f"web search request {index + 1} returned an API error in its output")
            if output:
                outputs.append(output)
    if scope.cancelled_caught:
        raise NestedToolError(f"web search timed out after {SEARCH_TIMEOUT:g} seconds")
    text = "\n".join(outputs)
    if failures:
        message = "\n".join(failures)
        raise NestedToolError(f"{message}\n\nWeb search output:\n{text}" if text else message)
    return text
