"""``NoPublicConstructor``: handles that only the library makes (trio's habit).

An ``Agent`` exists only inside ``open_agent``'s block, a ``Turn`` only once a prompt
was accepted, a ``TurnControl`` only from its turn: an instance built by hand would
have no nursery, no queue or no turn behind it. A class with this metaclass refuses
``Cls(...)`` with a ``TypeError`` that names the way to get one (its ``_how_to_get``);
the library builds instances with ``construct(Cls, ...)``, which each such class wraps
in a typed ``_create`` classmethod.
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar, final

__all__ = ["NoPublicConstructor", "construct"]

T = TypeVar("T")


@final
class NoPublicConstructor(type):
    """The metaclass of a class users may hold but not instantiate."""

    def __call__(cls, *args: object, **kwargs: object) -> NoReturn:
        how = getattr(cls, "_how_to_get", "")
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} has no public constructor" + (f"; {how}" if how else ""))


def construct(cls: type[T], *args: Any, **kwargs: Any) -> T:
    """An instance of ``cls`` built the ordinary way (``__new__``, then ``__init__``),
    past ``NoPublicConstructor.__call__``."""
    instance: T = type.__call__(cls, *args, **kwargs)
    return instance
