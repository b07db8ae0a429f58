"""An MCP server's log: the tail of its stderr and what the SDK said about it.

Each server keeps one bounded log (``ServerLog``, its last ``LOG_TAIL`` bytes) that a
failed call or a failed start quotes. Two things write to it:

- the server's stderr, through a pipe the agent drains (``stderr_pipe``);
- the MCP SDK's own log records about that server. The SDK logs what it cannot use
  -- a line of a stdio server's stdout that is not JSON-RPC, an unparsable HTTP or
  SSE body, a callback that raised -- with ``logger.exception``, and with no logging
  configured Python prints those records, traceback and all, on the host's stderr.
  ``capture_sdk_logs()`` puts a filter on the SDK's loggers that takes a record made
  while a server's log is *routed* (``routed(log)``: a context variable, set by the
  server's task -- every task the SDK starts under it inherits it -- and around each
  call) into that log as one line, and drops it; records made outside any server's
  task pass through untouched, so other users of the SDK in the process are not
  affected; so do records below ``WARNING`` (the SDK's debug notes, which a host sees
  only when it asked for them). ``ServerLog.on_report`` is told of the first such record of a server, for
  the agent to report (an ``api.warning``); later ones only go to the log.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TextIO

import trio

__all__ = ["LOG_TAIL", "ServerLog", "capture_sdk_logs", "routed", "stderr_pipe"]

LOG_TAIL = 4096
_REPORT_CHARS = 500
_ROUTE: ContextVar[ServerLog | None] = ContextVar("trio_agent_mcp_server_log", default=None)


class ServerLog:
    """The last ``LOG_TAIL`` bytes of what one server and the SDK said about it."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.reports = 0  # the SDK's records taken in
        self.on_report: Callable[[str], None] | None = None

    def write(self, chunk: bytes) -> None:
        self.data += chunk
        del self.data[:-LOG_TAIL]

    def report(self, text: str) -> None:
        """One record of the SDK's about this server: a line of the log, and the first
        one to ``on_report``."""
        line = " ".join(text.split())[:_REPORT_CHARS]
        if self.data and not self.data.endswith(b"\n"):
            self.write(b"\n")
        self.write(f"[mcp client] {line}\n".encode("utf-8", "replace"))
        self.reports += 1
        if self.reports == 1 and self.on_report is not None:
            self.on_report(line)

    def tail(self, limit: int = 1500) -> str:
        return bytes(self.data).decode("utf-8", "replace").strip()[-limit:]


@contextlib.contextmanager
def routed(log: ServerLog) -> Iterator[None]:
    """The SDK's log records made in this block (and in tasks started in it) go to ``log``."""
    token = _ROUTE.set(log)
    try:
        yield
    finally:
        _ROUTE.reset(token)


def _describe(record: logging.LogRecord) -> str:
    try:
        text = record.getMessage()
    except Exception:  # a record whose arguments do not fit its format
        text = str(record.msg)
    if record.exc_info and record.exc_info[1] is not None:
        error = record.exc_info[1]
        text += f" ({type(error).__name__}: {error})"
    return text


class _Capture(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        log = _ROUTE.get()
        if log is None or record.levelno < logging.WARNING:
            return True  # not about a server, or a debug/info record the host asked for
        log.report(_describe(record))
        return False


_FILTER = _Capture()


def capture_sdk_logs() -> None:
    """Put the filter on every logger of the SDK that exists now (idempotent; called
    when a server starts, after the SDK's modules are imported). The SDK names its
    loggers after its modules (``mcp.…``) and its session's ``client``."""
    loggers = logging.Logger.manager.loggerDict
    for name in list(loggers):
        logger = loggers[name]
        if (name == "client" or name.startswith("mcp.")) and isinstance(logger, logging.Logger):
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)


def stderr_pipe(log: ServerLog, nursery: trio.Nursery) -> tuple[TextIO, trio.Event]:
    """A pipe for the server's stderr, drained into ``log``; the event is set once the
    pipe is drained (every writer closed)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    stream = trio.lowlevel.FdStream(read_fd)
    drained = trio.Event()

    async def drain() -> None:
        try:
            async with stream:
                while chunk := await stream.receive_some(4096):
                    log.write(chunk)
        finally:
            drained.set()

    nursery.start_soon(drain)
    return os.fdopen(write_fd, "w", encoding="utf-8", errors="replace"), drained
