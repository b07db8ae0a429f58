"""``Record``: the base of internal value classes that need no attrs.

An attrs class is built when its module is imported: attrs writes and compiles its
``__init__``, ``__eq__``, ``__hash__`` and ``__repr__`` and makes a slotted copy of the
class, about half a millisecond each -- most of ``import trio_agent``'s own time when
every internal record was one. A ``Record`` subclass spells out ``__slots__`` and
``__init__`` (compiled with its module, into its ``.pyc``) and inherits equality,
hashing and ``repr`` by field, in ``__slots__`` order, as attrs would generate them.

Public classes stay attrs classes (``attrs.evolve``, ``attrs.fields``, validators,
cattrs); so do the ones that cattrs structures or code passes to ``attrs`` functions.
A record is frozen by convention only: nothing assigns to a field after ``__init__``.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["Record"]


class Record:
    """Equality, hashing and ``repr`` over ``__slots__`` (a subclass's own, in order);
    ``__match_args__`` is for the subclass to set when it is matched positionally."""

    __slots__: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash((self.__class__, self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name, '<unset>')!r}" for name in self.__slots__)
        return f"{self.__class__.__qualname__}({fields})"
