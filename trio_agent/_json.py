"""The single cattrs converter of trio_agent.

Frames, events and snapshots are attrs values; this converter is the one place that
turns them into JSON-able data and back. ``forbid_extra_keys`` stays off so the
server can add fields without breaking us; unknown frame *types* are handled by
``_wire.frames.parse_frame`` (kept as ``UnknownFrame``, never fatal).
"""

from __future__ import annotations

import cattrs

__all__ = ["converter"]

converter = cattrs.Converter(omit_if_default=False, forbid_extra_keys=False)
