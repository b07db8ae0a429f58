"""Sync user tools: run in a Trio worker thread, abandoned when the turn is cancelled.

A blocking function must not run on the event loop (it would stall every agent and
stream in the process), so a sync ``@ta.tool`` function, or a sync handler given to
``Tools.function``/``Tools.custom``, runs in ``trio.to_thread.run_sync(...,
abandon_on_cancel=True)``. Python cannot stop a thread, so cancelling the turn does not
wait for it: the call returns at once and the thread runs on until the function returns
by itself, its result (or exception) discarded. Only one call's worth of work leaks, and
only for as long as the function takes; a tool that must stop promptly should be
``async`` or check a flag of its own.

The thread's ``ToolContext.report`` hops back to the Trio thread, and does nothing once
the call is over (so an abandoned thread never reports under a finished turn).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import attrs
import trio

if TYPE_CHECKING:
    from ._context import ToolContext

__all__ = ["is_async_callable", "run_in_thread", "threaded_handler"]

_T = TypeVar("_T")


def is_async_callable(fn: object) -> bool:
    """``async def`` functions (also through ``functools.partial``) and instances with
    an ``async def __call__``."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 -- an instance with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


class _ThreadReports:
    """The context a worker thread sees: ``report`` runs in the Trio thread while the
    call lasts, and is dropped after."""

    def __init__(self, ctx: ToolContext) -> None:
        self._report = ctx.report
        self.active = True
        self.context = attrs.evolve(ctx, progress=self._from_thread)

    def _in_trio(self, message: str) -> None:
        if self.active:
            self._report(message)

    def _from_thread(self, message: str) -> None:
        try:
            trio.lowlevel.current_task()
        except RuntimeError:  # a worker thread: hop back to Trio
            try:
                trio.from_thread.run_sync(self._in_trio, message)
            except trio.RunFinishedError:
                pass
        else:
            self._in_trio(message)


async def run_in_thread(
    fn: Callable[..., _T], values: dict[str, object], ctx: ToolContext, context_param: str | None
) -> _T:
    """``fn(**values)`` in a worker thread; ``context_param``, when given, names the
    keyword that takes the (thread-safe) context."""
    reports = _ThreadReports(ctx)
    if context_param is not None:
        values = {**values, context_param: reports.context}
    try:
        return await trio.to_thread.run_sync(functools.partial(fn, **values), abandon_on_cancel=True)
    finally:
        reports.active = False


def _boxed(handler: Callable[[ToolContext, _T], object], ctx: ToolContext, args: _T) -> tuple[object]:
    """The handler's result in a tuple: Trio refuses a thread function that returns a
    coroutine, and a ``lambda`` adapter returning one is a valid handler."""
    return (handler(ctx, args),)


def threaded_handler(handler: Callable[[ToolContext, _T], object]) -> Callable[[ToolContext, _T], Awaitable[object]]:
    """A sync raw handler ``handler(ctx, args)`` as the async handler the dispatcher
    awaits. What it returns is the result; if that is an awaitable (a ``lambda`` that
    returns a coroutine), it is awaited in the turn's task."""

    async def run(ctx: ToolContext, args: _T) -> object:
        reports = _ThreadReports(ctx)
        try:
            (result,) = await trio.to_thread.run_sync(
                functools.partial(_boxed, handler, reports.context, args), abandon_on_cancel=True
            )
            if inspect.isawaitable(result):
                result = await result
            return result
        finally:
            reports.active = False

    return run
