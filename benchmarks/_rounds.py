"""The order of interleaved benchmark turns (``turn_overhead``'s paired rows).

Turns of the variants being compared and of their floor run in rounds, one turn of each
per round, so all of them see the same moments of a busy machine. The order within a
round matters too: the turn after another client's turn runs colder (its code was
evicted from the caches; at 25 ms RTT ~0.1 ms, more than the effects being measured), so
a fixed rotation -- in which the bare client always followed an agent turn and one agent
variant always followed the bare client -- was biased.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["interleave", "round_orders"]

T = TypeVar("T")


def round_orders(n: int) -> list[tuple[int, ...]]:
    """The client orders ``interleave``'s rounds cycle through: every permutation once, so
    each client runs first, second, ... equally often; for three clients (the judged rows:
    api_events on, off, the bare client) arranged so that, back to back, each client also
    follows each other client equally often and never itself (the module docstring says
    why)."""
    orders = list(itertools.permutations(range(n)))
    if n == 3:
        for arranged in itertools.permutations(orders[1:]):
            sequence = [c for order in (orders[0], *arranged) for c in order]
            follows = Counter(zip(sequence[-1:] + sequence[:-1], sequence, strict=True))
            if all(a != b for a, b in follows) and len(set(follows.values())) == 1:
                return [orders[0], *arranged]
    return orders


async def interleave(clients: list[Callable[[], Awaitable[T]]], rounds: int) -> list[list[T]]:
    """``rounds`` rounds of one turn per client in the orders of ``round_orders`` (every
    client goes first, second, ... equally often, and follows each other equally often),
    so the variants and the floor see the same moments of the machine: sample ``i`` of
    every list is one round's."""
    out: list[list[T]] = [[] for _ in clients]
    orders = round_orders(len(clients))
    for i in range(rounds):
        for j in orders[i % len(orders)]:
            out[j].append(await clients[j]())
    return out
