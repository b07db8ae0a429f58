"""Time units shared by event payloads: Trio's clock counts seconds, events report nanoseconds."""

from __future__ import annotations

__all__ = ["NS_PER_SECOND", "ns"]

NS_PER_SECOND = 1_000_000_000


def ns(seconds: float) -> int:
    """``seconds`` as whole nanoseconds (the unit of every ``*_ns`` payload field)."""
    return int(seconds * NS_PER_SECOND)
