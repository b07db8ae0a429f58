"""JSON text for everything that leaves the process: request bodies, rollout lines,
JSONL events and snapshots.

One policy for text that cannot be encoded: a Python string may hold *lone UTF-16
surrogates* (from a server's ``"\\ud800"`` escape, a JavaScript string, or a file name
decoded with ``os.fsdecode``), which UTF-8 cannot encode. History and events keep
what they were given; wherever JSON text is produced for the outside it is always
valid UTF-8, each lone surrogate replaced by U+FFFD (the replacement character). The
same history therefore always produces the same bytes (a full replay, a rollout
append and a JSONL line agree). Non-finite floats (``NaN``, ``Infinity``) are not
JSON; they never reach a request either: frames that contain them are refused when
decoded.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["dumps", "scrub_surrogates"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (ASCII text is returned as is)."""
    if text.isascii():
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def dumps(value: Any) -> str:
    """Compact JSON (``ensure_ascii=False``) that always encodes as UTF-8."""
    return scrub_surrogates(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
