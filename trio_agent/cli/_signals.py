"""Ctrl-C (SIGINT) and SIGTERM for the ``trio-agent`` commands.

Theory of operation. Left to Trio, SIGINT raises ``KeyboardInterrupt`` somewhere in
the main task; it unwinds through every nursery, so it leaves ``trio.run`` wrapped in
exception groups (40 lines of traceback) and cuts cleanup short wherever it lands.
Instead, a command runs its work inside :func:`open_interrupts`, which holds
``trio.open_signal_receiver(SIGINT, SIGTERM)`` for the whole block:

- the **first** signal is recorded on the :class:`Interrupts` (which one, when) and
  the command's ``on_interrupt`` runs in a task of its own -- ``run`` cancels the live
  turn there, so its tools are killed and its terminal event still reaches the
  printer, then the agent closes normally (rollout flushed, sockets closed);
- the watch keeps listening, and a **second** signal exits at once
  (:func:`exit_now`: one line on stderr, ``os._exit(128 + signum)``), for cleanup that
  takes too long. Commands' processes still end: the subreaper helper and every
  supervisor see their sockets close and terminate their trees.

Structure: the watcher task lives in a nursery *inside* the receiver's block, so it can
never outlive it: a command whose work ends before the watcher first ran (a
configuration refused at once) closes the nursery -- cancelling the watcher -- before
the receiver closes.

Once the command has said its last word (the ``-- cancelled`` line), it calls
:meth:`Interrupts.settle`: later signals are ignored for the rest of the process
(``SIG_IGN``, which interpreter finalisation keeps), so a Ctrl-C pressed again while
the process winds down neither adds a line nor kills it by SIGINT: exactly one line,
exit 128 + the first signal. Between the receiver's block and a settled state (the
few instructions around the receiver's own handler switch), a Python-level latch
stands in for the receiver (:func:`_latch`), so no window reverts to Trio's
``KeyboardInterrupt``.

After ``trio.run`` returned (``--otel`` flushing its exporters, which is bounded but
not instant), :func:`exit_on_signal` makes a signal exit at once, from a daemon thread
(see there why) -- unless the command settled (then signals stay ignored). Before the
receiver is installed Trio's own handling applies, and ``_main.main`` turns the
``KeyboardInterrupt`` that escapes (bare or inside an exception group) into exit
status 130 without a traceback.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import FrameType
from typing import Any

import trio

__all__ = ["Interrupts", "exit_now", "exit_on_signal", "interrupted_only", "open_interrupts"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None  # what getsignal returns


class Interrupts:
    """The first signal a command received (``None`` while there was none), and whether
    the command has said its last word about it (:meth:`settle`)."""

    __slots__ = ("at", "settled", "signum")

    def __init__(self, signum: int | None = None, at: float | None = None) -> None:
        self.signum = signum
        self.at = at  # Trio's clock when it arrived
        self.settled = False

    @property
    def received(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        """How the user sees it: ``Ctrl-C`` for SIGINT, else the signal's name."""
        if self.signum is None or self.signum == signal.SIGINT:
            return "Ctrl-C"
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal's number (130 for Ctrl-C), the shell's convention."""
        return 128 + (self.signum if self.signum is not None else signal.SIGINT)

    def settle(self) -> None:
        """The command printed its one line about the signal and is only winding down:
        SIGINT and SIGTERM are ignored for the rest of this process (main thread only)."""
        self.settled = True
        _ignore_signals()


def _ignore_signals() -> None:
    for signum in _SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def exit_now(signum: int, *, again: bool = True) -> None:
    """Leave the process at once (no cleanup), saying so in one line on stderr."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    with contextlib.suppress(OSError):
        os.write(2, f"trio-agent: {name}{' again' if again else ''}: exiting now, without waiting for "
                    "cleanup\n".encode())
    os._exit(128 + signum)


def exit_on_signal() -> None:
    """From now on SIGINT and SIGTERM exit at once (for the time after ``trio.run``);
    a signal the command already settled stays ignored. At interpreter exit both are
    ignored (finalisation would otherwise reset Python-level handlers to the default
    action, and a late Ctrl-C would kill the process by SIGINT).

    A Python signal handler runs in the main thread only, and only once that thread
    runs Python code again; a main thread blocked joining an exporter's thread that
    waits on a silent collector may never get there (the kernel delivered the signal to
    that other thread). So the handlers do nothing, and the exit happens in a daemon
    thread woken by the signal's byte on ``signal.set_wakeup_fd``, which CPython's C
    handler writes whichever thread the signal interrupted."""
    atexit.register(_ignore_signals)
    caught = [signum for signum in _SIGNALS if signal.getsignal(signum) != signal.SIG_IGN]
    if not caught:
        return

    def ignore(_signum: int, _frame: FrameType | None) -> None:
        pass

    read, write = os.pipe()
    os.set_blocking(write, False)

    def watch() -> None:
        data = os.read(read, 1)
        exit_now(data[0] if data else signal.SIGINT, again=False)

    threading.Thread(target=watch, name="trio-agent: exit on a signal", daemon=True).start()
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    for signum in caught:
        signal.signal(signum, ignore)


@contextlib.contextmanager
def _latch(interrupts: Interrupts) -> Iterator[None]:
    """A Python-level handler around the receiver's block (see the module docstring):
    ignores a signal once settled, exits at once on a second one, else does what the
    handler it replaced did. On the way out: ``SIG_IGN`` if settled, the latch kept
    while a received signal is not settled yet, else the handlers it found."""
    saved: dict[int, _Handler] = {signum: signal.getsignal(signum) for signum in _SIGNALS}

    def latch(signum: int, frame: FrameType | None) -> None:
        if interrupts.settled:
            return
        if interrupts.received:
            exit_now(signum)
        previous = saved[signum]
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:  # the default action (or a handler set outside Python)
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    for signum in _SIGNALS:
        signal.signal(signum, latch)
    try:
        yield
    finally:
        if interrupts.settled:
            _ignore_signals()
        elif not interrupts.received:
            for number, previous in saved.items():
                signal.signal(number, previous)


async def _watch(signals: AsyncIterator[int], interrupts: Interrupts,
                 on_interrupt: Callable[[Interrupts], Awaitable[None]], nursery: trio.Nursery) -> None:
    async for signum in signals:
        if interrupts.settled:
            continue
        if interrupts.received:
            exit_now(signum)
        interrupts.signum, interrupts.at = signum, trio.current_time()
        nursery.start_soon(on_interrupt, interrupts)


@contextlib.asynccontextmanager
async def open_interrupts(
    interrupts: Interrupts, on_interrupt: Callable[[Interrupts], Awaitable[None]]
) -> AsyncIterator[Interrupts]:
    """Catch SIGINT/SIGTERM for the block (see the module docstring). ``on_interrupt``
    runs once, on the first signal, in a task that is cancelled when the block ends;
    the watcher's nursery is inside the receiver's block, so it ends first."""
    with _latch(interrupts), trio.open_signal_receiver(*_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch, signals, interrupts, on_interrupt, nursery)
            try:
                yield interrupts
            finally:
                nursery.cancel_scope.cancel()


def interrupted_only(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``KeyboardInterrupt``, or a group of nothing else (what
    Trio raises when SIGINT arrived before a command caught signals itself)."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    if isinstance(exc, BaseExceptionGroup):
        _, rest = exc.split(KeyboardInterrupt)
        return rest is None
    return False
