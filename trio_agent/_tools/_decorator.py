"""``ta.tool``: the decorator that makes a typed tool (the work is in ``_typed``,
imported on first use, so that ``import trio_agent`` builds no schema machinery)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, Protocol, overload

if TYPE_CHECKING:
    from . import ToolSpec

__all__ = ["ToolDecorator", "tool"]

_P = ParamSpec("_P")  # a typed tool's own parameters


class ToolDecorator(Protocol):
    """What ``@ta.tool(name=..., description=...)`` returns: apply it to the function."""

    def __call__(self, fn: Callable[_P, object], /) -> ToolSpec: ...


@overload
def tool(fn: Callable[_P, object], /, *, name: str | None = None,
         description: str | None = None) -> ToolSpec: ...
@overload
def tool(fn: None = None, /, *, name: str | None = None, description: str | None = None) -> ToolDecorator: ...
def tool(
    fn: Callable[_P, object] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> ToolSpec | ToolDecorator:
    """Make a typed tool from a function: ``@ta.tool`` or ``@ta.tool(name=...,
    description=...)``; returns the ``ToolSpec`` to pass to ``Tools.add``.

    The function's name (or ``name``) names the tool, its docstring's first part (or
    ``description``) describes it, and its parameters are the tool's arguments: each
    needs a type annotation (``str``, ``int``, ``float``, ``bool``, ``None``,
    ``Literal``, an ``Enum``, ``list[T]``, ``tuple[A, B]``, ``dict[str, T]``,
    ``T | None``, ``datetime``/``date``/``time``/``UUID``/``Path``/``Decimal`` (sent as
    strings), a ``TypedDict``, a dataclass or an attrs class, recursive ones included;
    with pydantic installed, a pydantic model or any type pydantic's ``TypeAdapter``
    takes). ``Annotated[T, "text"]`` or ``Annotated[T, pydantic.Field(description=...)]``
    adds a description, ``annotated-types`` constraints (``Ge``, ``Le``, ``MinLen``, ...)
    or ``Field(ge=..., min_length=..., pattern=...)`` add bounds, which are both in the
    schema and enforced; a default (or ``= Field(default, ...)``) makes it optional,
    and ``Args:``/``:param x:``/NumPy docstring entries describe them. A parameter
    annotated ``ta.ToolContext`` receives the call's context. Every object in the
    schema is closed (``additionalProperties: false``); it is sent with ``strict:
    true`` when OpenAI's strict mode can take it (every field required, no
    ``prefixItems``, ``minLength`` or open object). Arguments are checked and
    converted before the function runs; bad ones (a wrong type, an unknown field, a
    bound passed) answer the model with a failed result naming each field, and the
    function is not called. Raises ``ConfigError`` for a function that cannot be
    described.

    An ``async def`` function runs in the turn's task: it must not block (a step of it
    that holds the event loop longer than ``Tools.with_blocking_warning``'s threshold
    emits ``tool.blocked``). A plain ``def`` function runs in a worker thread
    (``trio.to_thread.run_sync(..., abandon_on_cancel=True)``): when the turn is
    cancelled the call returns at once and the thread is abandoned -- it runs on until
    the function returns, and its result or exception is discarded. Its
    ``ctx.report`` may be called from the thread.
    """

    def make(function: Callable[..., object]) -> ToolSpec:
        from . import ToolSpec
        from ._typed import typed_spec

        spec = typed_spec(function, name=name, description=description)
        assert isinstance(spec, ToolSpec)
        return spec

    return make(fn) if fn is not None else make
