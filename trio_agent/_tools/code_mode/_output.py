"""Pure formatting of `exec` / `wait` results (no I/O, no Trio).

Theory of operation: a cell produces an ordered list of content items
(`input_text` / `input_image` dicts). When an `exec` or `wait` call returns,
those items are truncated to the token budget (`truncate_content`) and
prefixed with a status header (`format_cell_output`):

    "<status>\\nWall time <s.s> seconds\\nOutput:\\n"

with status one of `Script completed`, `Script running with cell ID N`,
`Script terminated`, `Script failed`. With no other content the whole output
is that header as a plain string; otherwise it is a content array whose first
item is the header. Failures that happen before a cell runs (bad pragma,
unknown cell) are a plain string: header followed by the message
(`format_failure`).

Truncation follows nanocodex `code_mode/output.rs` (4 bytes per token,
default 10,000 tokens): text-only output becomes a single text item
"Warning: truncated output (original token count: N)\\nTotal output lines:
M\\n\\n" + middle-truncated text; mixed output spends a per-item budget in
order, keeps every image and appends "[omitted N text items ...]".
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._jsontext import scrub_surrogates

DEFAULT_MAX_OUTPUT_TOKENS = 10_000
APPROX_BYTES_PER_TOKEN = 4

STATUS_COMPLETED = "Script completed"
STATUS_TERMINATED = "Script terminated"
STATUS_FAILED = "Script failed"

ContentItem = dict[str, object]


def status_running(cell_id: int) -> str:
    """The status line of a cell that is still live after the call returned."""
    return f"Script running with cell ID {cell_id}"


def format_header(status: str, wall_time: float) -> str:
    """`"<status>\\nWall time <s.s> seconds\\nOutput:\\n"`."""
    return f"{status}\nWall time {wall_time:.1f} seconds\nOutput:\n"


def format_failure(message: str, wall_time: float) -> str:
    """Plain-string failure output: `Script failed` header, then `message`."""
    return format_header(STATUS_FAILED, wall_time) + message


def format_cell_output(
    status: str,
    wall_time: float,
    content: Sequence[ContentItem],
    max_output_tokens: int | None = None,
) -> str | list[ContentItem]:
    """Truncate `content` and prefix the status header (see module docstring)."""
    header = format_header(status, wall_time)
    items = truncate_content(content, max_output_tokens)
    if not items:
        return header
    return [{"type": "input_text", "text": header}, *items]


def approx_tokens(byte_count: int) -> int:
    """Tokens for `byte_count` bytes at 4 bytes per token, rounded up."""
    return (byte_count + APPROX_BYTES_PER_TOKEN - 1) // APPROX_BYTES_PER_TOKEN


def truncate_content(
    content: Sequence[ContentItem], max_output_tokens: int | None = None
) -> list[ContentItem]:
    """Bound `content` to `max_output_tokens` (default 10,000).

    JavaScript strings may hold lone surrogates, which UTF-8 cannot encode; each is
    replaced by U+FFFD here (the runtime's one policy for such text, `_jsontext`).
    """
    budget = DEFAULT_MAX_OUTPUT_TOKENS if max_output_tokens is None else max_output_tokens
    content = [_scrubbed(item) for item in content]
    if all(item.get("type") == "input_text" for item in content):
        return _truncate_text_only(content, budget)
    return _truncate_mixed(content, budget)


def _scrubbed(item: ContentItem) -> ContentItem:
    text = item.get("text")
    return {**item, "text": scrub_surrogates(text)} if isinstance(text, str) else item


def _truncate_text_only(content: Sequence[ContentItem], budget: int) -> list[ContentItem]:
    text = "\n".join(str(item.get("text", "")) for item in content)
    size = len(text.encode())
    if size <= budget * APPROX_BYTES_PER_TOKEN:
        return list(content)
    warning = (
        f"Warning: truncated output (original token count: {approx_tokens(size)})\n"
        f"Total output lines: {_count_lines(text)}\n\n"
    )
    return [{"type": "input_text", "text": warning + truncate_middle(text, budget)}]


def _truncate_mixed(content: Sequence[ContentItem], budget: int) -> list[ContentItem]:
    output: list[ContentItem] = []
    remaining = budget
    omitted = 0
    for item in content:
        if item.get("type") != "input_text":
            output.append(item)  # images are always kept
            continue
        if remaining == 0:
            omitted += 1
            continue
        text = str(item.get("text", ""))
        cost = approx_tokens(len(text.encode()))
        if cost <= remaining:
            output.append(item)
            remaining -= cost
            continue
        snippet = truncate_middle(text, remaining)
        if snippet:
            output.append({"type": "input_text", "text": snippet})
        else:
            omitted += 1
        remaining = 0
    if omitted:
        output.append({"type": "input_text", "text": f"[omitted {omitted} text items ...]"})
    return output


def truncate_middle(text: str, max_tokens: int) -> str:
    """Keep the head and tail of `text` within `max_tokens`, marking the cut.

    The marker is `…N tokens truncated…`; cuts fall on UTF-8 character
    boundaries (the kept prefix rounds down, the kept suffix rounds up).
    """
    if not text:
        return ""
    data = text.encode()
    byte_budget = max_tokens * APPROX_BYTES_PER_TOKEN
    if len(data) <= byte_budget and max_tokens > 0:
        return text
    if byte_budget == 0:
        return f"…{approx_tokens(len(data))} tokens truncated…"
    left = byte_budget // 2
    right = byte_budget - left
    prefix_end = _floor_boundary(data, left)
    suffix_start = max(_ceil_boundary(data, len(data) - right), prefix_end)
    removed = suffix_start - prefix_end
    marker = f"…{approx_tokens(removed)} tokens truncated…"
    return data[:prefix_end].decode() + marker + data[suffix_start:].decode()


def _is_boundary(data: bytes, index: int) -> bool:
    # A UTF-8 continuation byte looks like 0b10xxxxxx.
    return index >= len(data) or (data[index] & 0xC0) != 0x80


def _floor_boundary(data: bytes, index: int) -> int:
    index = min(index, len(data))
    while not _is_boundary(data, index):
        index -= 1
    return index


def _ceil_boundary(data: bytes, index: int) -> int:
    index = min(index, len(data))
    while not _is_boundary(data, index):
        index += 1
    return index


def _count_lines(text: str) -> int:
    # Rust's `str::lines().count()`: "\n"-separated, a trailing newline ends
    # the last line instead of starting an empty one.
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)
