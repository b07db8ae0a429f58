"""One client connection: its nursery (reader, request dispatcher, writer), its bounded
outgoing queue and the server requests it was asked to answer.

Theory of operation. The reader task parses each incoming message: a reply to a
server request is routed at once (``PendingReply``), so a client answering
``item/tool/call`` is never stuck behind a slow request; requests and notifications
go through a small inbox (``INBOX_LIMIT``; when it is full the reader waits, which is
backpressure on the client) to the dispatcher, which serves requests one at a time,
in order, and queues each answer. The reader serves a request itself, without that
task hop (issue 30: a warm turn's ``turn/start``), when nothing waits in the inbox or
is being served (``_queued``: the order stays the client's) and the host says its
handler waits on nothing slow (``ConnectionHost.serves_inline``: ``turn/start`` and
``turn/steer`` on a loaded thread, no file to read) -- so replies to server requests
are never held back by more than in-memory steps; a client notification
(``initialized``) is handled at once under the same condition. A malformed line is answered (``-32600``/``-32700``
when its id is readable, else a ``warning`` notification) and the connection goes on.
No message can end more than its own connection: ``parse`` never raises, a handler's
failure (an ``RpcError``, or a bug: ``-32603``) and a response that cannot be encoded
are that request's error, and a bug in the connection's own tasks closes this
connection alone (said on stderr with its traceback) -- never the server.

Everything the server sends goes through one queue of at most ``outgoing_limit``
encoded messages, emptied by the writer task. Queuing never blocks the server: when a
client reads too slowly for its queue to have room, the connection is dropped (its
subscriptions end, running turns go on), so one slow client costs at most that many
messages of memory and never delays another client or a thread.

The send path is what a broadcast costs per client (issue 23: at 200 clients, 96% of
what the server sent were other clients' ``thread/started`` and
``thread/status/changed``), so it is kept to the bare minimum: the server encodes a
message once for every recipient; queuing it is a ``deque`` append, and it wakes the
writer only when the writer is parked on an empty queue (a burst costs one wakeup);
the writer takes everything queued (up to ``WRITE_BATCH``) and hands it to the
channel in one ``send_batch``, without a scheduler pass of its own between batches.
Over a channel that can write without waiting (``SendsNow``: WebSocket), a parked
writer is not even woken (issue 30): the connection asks the server's ``Flusher``,
one task for every connection, which runs once what is ready was queued and writes
each due connection's queue, in one write each, with no task switch per connection
(the pump's burst and a request's answer are written at their end by the task that
made them, ``Flusher.held``); only what the socket does not take goes to the writer.

When the peer finishes (EOF), the queued requests are served and the queue flushed
for up to ``CLOSE_GRACE`` seconds; then the nursery is cancelled. A peer that closed
cleanly (``PeerClosed`` on a send: stdio's reader closed its end, a WebSocket close
with 1000/1001) is no failure: its requests are still served, their answers dropped.
A transport that breaks (reset, a WebSocket gone without a close frame) drops the
connection and says so on stderr. Either way the server is told
(``ConnectionHost.connection_closed``): it unsubscribes the connection everywhere and
fails the tool calls only it could answer.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import attrs
import trio

from ._channel import MessageChannel, MessageTooLarge, PeerClosed, SendsNow
from ._jsonrpc import (
    INTERNAL_ERROR,
    ErrorResponse,
    Malformed,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
    encode,
    error_message,
    notification_message,
    parse,
    request_message,
    response_message,
    shown,
)
from ._pending import PendingReply

__all__ = ["CLOSE_GRACE", "INBOX_LIMIT", "OUTGOING_LIMIT", "Connection", "ConnectionHost", "Flusher", "PendingReply",
           "Reply"]

OUTGOING_LIMIT = 4096  # encoded messages queued for one client before it is dropped
INBOX_LIMIT = 64  # requests read ahead of the one being served
CLOSE_GRACE = 5.0  # seconds to finish queued requests and flush after the peer's EOF
WRITE_BATCH = 512  # queued messages sent in one write
_ids = itertools.count(1)


@attrs.frozen
class Reply:
    """A handler's answer: the ``result``, and ``after`` to run right after the
    response is queued (notifications that must follow it, e.g. ``thread/started``)."""

    result: Any
    after: Callable[[], None] | None = None


class ConnectionHost(Protocol):
    """What a connection needs from the server."""

    async def handle_request(self, conn: Connection, request: Request) -> Reply: ...

    def serves_inline(self, conn: Connection, request: Request) -> bool:
        """Whether the reader may serve ``request`` itself: its handler waits on
        nothing but in-memory steps (never on this client, the disk or the network)."""
        ...

    def handle_notification(self, conn: Connection, notification: Notification) -> None: ...

    def connection_closed(self, conn: Connection) -> None: ...

    def now_ms(self) -> int: ...


class Flusher:
    """Writes the queues of due connections from one task (see the module docstring);
    ``run`` it until ``close``. The pump, which queues most messages, writes them
    itself at the end of its burst (``held``): no task switch at all."""

    def __init__(self) -> None:
        self._due: list[Connection] = []
        self._wake = trio.Event()
        self._closed = False
        self._held = False

    def due(self, conn: Connection) -> None:
        if self._closed:
            conn.flush_now()  # its writer, woken
            return
        self._due.append(conn)
        if not self._held:
            self._wake.set()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The block queues (a request's reply); what it made due is written when it ends."""
        self.hold()
        try:
            yield
        finally:
            self.release()

    def hold(self) -> None:
        """From now until ``release`` (in a finally), connections made due are written
        then, together (the pump's burst: its own calls, not a context manager's
        generator, as it runs per burst of every thread)."""
        self._held = True

    def release(self) -> None:
        self._held = False
        self.flush()

    def flush(self) -> None:
        """Write every due connection's queue now (a bug writing one drops that one alone)."""
        due, self._due = self._due, []
        for conn in due:
            try:
                conn.flush_now()
            except Exception as exc:  # never out of the pump, nor past the other connections
                traceback.print_exc(file=sys.stderr)
                conn.drop(f"internal error writing to it: {type(exc).__name__}: {exc}")

    async def run(self) -> None:
        while not self._closed:
            await self._wake.wait()
            self._wake = trio.Event()
            self.flush()

    def close(self) -> None:
        """Stop (``run`` returns); connections due after this wake their writers."""
        self._closed = True
        self._wake.set()
        self.flush()


class Connection:
    """See the module docstring. Created and run by the server (``AppServer.serve_connection``)."""

    def __init__(self, host: ConnectionHost, channel: MessageChannel, *, outgoing_limit: int = OUTGOING_LIMIT,
                 label: str = "client", flusher: Flusher | None = None) -> None:
        self.id = next(_ids)
        self.label = label
        self.initialized = False
        self.client_name: str | None = None
        self.opt_out: frozenset[str] = frozenset()
        self.closed = False
        self._host = host
        self._channel = channel
        self._limit = outgoing_limit
        self._outbox: collections.deque[str] = collections.deque()
        self._outbox_closed = False  # finish(): what is queued is flushed, nothing more is taken
        self._writer_wake: trio.Event | None = None  # set while the writer waits for a message
        self._now = channel if isinstance(channel, SendsNow) else None
        self._flusher = flusher if self._now is not None else None
        self._flush_due = False  # the flusher will write the queue (the writer is parked)
        self._pending: dict[RequestId, PendingReply] = {}
        self._next_request = itertools.count(0)
        self._scope: trio.CancelScope | None = None
        self._queued = 0  # messages handed to the dispatcher and not yet done with

    def __repr__(self) -> str:
        return f"<Connection {self.id} {self.label}>"

    # -- sending (never blocks) ----------------------------------------------------------

    def send_text(self, text: str, method: str | None = None) -> None:
        """Queue one encoded message; drops the connection when its queue is full."""
        if self.closed or self._outbox_closed or (method is not None and method in self.opt_out):
            return
        if len(self._outbox) >= self._limit:
            self.drop(f"it read too slowly: {self._limit} messages were already queued for it")
            return
        self._outbox.append(text)
        if self._writer_wake is None or self._flush_due:
            return  # the writer is busy (it takes this next), or the flusher will write it
        if self._flusher is None:
            self._wake_writer()
            return
        self._flush_due = True
        self._flusher.due(self)

    def flush_now(self) -> None:
        """(The flusher) write the queue from here while the writer is parked; wake the
        writer for what cannot be written at once."""
        self._flush_due = False
        outbox, now = self._outbox, self._now
        if self.closed or self._writer_wake is None or not outbox:
            return
        whole = len(outbox) <= WRITE_BATCH  # (most often: then taken with one clear, not a popleft each)
        batch = list(outbox) if whole else list(itertools.islice(outbox, WRITE_BATCH))
        if now is not None and not self._outbox_closed and now.send_now(batch):
            if whole:
                outbox.clear()
            else:
                for _ in batch:
                    outbox.popleft()
            if not outbox and not now.pending:
                return
        self._wake_writer()

    def _wake_writer(self) -> None:
        wake = self._writer_wake
        if wake is not None:
            self._writer_wake = None
            wake.set()

    def send(self, message: dict[str, Any]) -> None:
        self.send_text(encode(message), message.get("method"))

    def notify(self, method: str, params: Any) -> None:
        self.send(notification_message(method, params, emitted_at_ms=self._host.now_ms()))

    def warn(self, message: str) -> None:
        self.notify("warning", {"message": message, "threadId": None})

    def ask(self, method: str, params: Any, pending: PendingReply) -> None:
        """Send a server request whose answer resolves ``pending``."""
        if self.closed:
            return
        request_id = next(self._next_request)
        self._pending[request_id] = pending
        pending.sent_to(self, request_id)
        self.send(request_message(request_id, method, params))

    def forget_request(self, request_id: RequestId) -> None:
        self._pending.pop(request_id, None)

    def drop(self, reason: str) -> None:
        """Close this connection now (from any task)."""
        if self.closed:
            return
        self.closed = True
        print(f"trio-agent serve: dropping {self.label} (connection {self.id}): {reason}", file=sys.stderr)
        if self._scope is not None:
            self._scope.cancel()

    # -- running -------------------------------------------------------------------------

    def finish(self) -> None:
        """Close gracefully (server shutdown): what is queued is flushed, then the
        connection closes (``run`` returns)."""
        self._outbox_closed = True
        self._wake_writer()

    async def run(self) -> None:
        """Serve the connection until the peer goes away, it is dropped or finished."""
        inbox_send, inbox_receive = trio.open_memory_channel[Request | Notification](INBOX_LIMIT)
        writer_done = trio.Event()
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                if self.closed:
                    nursery.cancel_scope.cancel()
                nursery.start_soon(self._write_loop, writer_done)
                nursery.start_soon(self._dispatch_loop, inbox_receive)
                nursery.start_soon(self._read_then_drain, inbox_send, writer_done)
                await writer_done.wait()  # the queue was closed and flushed (or the transport failed)
                nursery.cancel_scope.cancel()
        except Exception:  # a bug in this connection's own tasks: it closes, no other client notices
            print(f"trio-agent serve: internal error serving {self.label} (connection {self.id}); closing it:",
                  file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
        finally:
            self.closed = True
            for pending in list(self._pending.values()):
                pending.gone(self)
            self._pending.clear()
            self._host.connection_closed(self)
            with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                await self._channel.aclose()

    async def _read_then_drain(self, inbox: trio.MemorySendChannel[Request | Notification],
                               writer_done: trio.Event) -> None:
        async with inbox:
            await self._read_loop(inbox)
        # EOF: the dispatcher serves what was queued, then closes the outgoing queue and
        # the writer flushes it; if that takes longer than CLOSE_GRACE, stop anyway.
        with trio.move_on_after(CLOSE_GRACE):
            await writer_done.wait()
        writer_done.set()

    async def _read_loop(self, inbox: trio.MemorySendChannel[Request | Notification]) -> None:
        while True:
            try:
                text = await self._channel.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return
            except trio.BrokenResourceError as exc:  # reset, or gone without a close (1006): said
                self.drop(f"its transport failed ({exc})")
                return
            except MessageTooLarge as exc:
                self.warn(f"ignored a message: {exc}")
                continue
            message = parse(text)
            if isinstance(message, Response | ErrorResponse):
                self._route_reply(message)
            elif isinstance(message, Malformed):
                self._answer_malformed(message)
            elif self._queued:  # behind what the dispatcher has: in order, after it
                self._queued += 1
                await inbox.send(message)
            elif isinstance(message, Notification):
                self._host.handle_notification(self, message)
            elif self._host.serves_inline(self, message):
                await self._serve(message)  # nothing ahead of it, and it waits on nothing slow
            else:
                self._queued += 1
                await inbox.send(message)

    def _route_reply(self, message: Response | ErrorResponse) -> None:
        pending = self._pending.pop(message.id, None) if message.id is not None else None
        if pending is not None:
            pending.answered(self, message)
        # A reply to a request that was resolved elsewhere or abandoned is expected; ignore it.

    def _answer_malformed(self, message: Malformed) -> None:
        if message.id is not None:
            self.send(error_message(message.id, RpcError(message.reason, code=message.code)))
        else:
            self.warn(f"ignored a message that is not JSON-RPC: {message.reason}")

    async def _dispatch_loop(self, inbox: trio.MemoryReceiveChannel[Request | Notification]) -> None:
        async with inbox:
            async for message in inbox:
                try:
                    if isinstance(message, Notification):
                        self._host.handle_notification(self, message)
                    else:
                        await self._serve(message)
                finally:
                    self._queued -= 1
        self.finish()  # EOF and nothing left to answer: the writer flushes and finishes

    async def _serve(self, request: Request) -> None:
        try:
            reply = await self._host.handle_request(self, request)
            # No checkpoint between the handler's return and queuing its response, so a
            # notification the handler caused cannot overtake it (see _hub).
            text = encode(response_message(request.id, reply.result))
        except RpcError as exc:
            self.send(error_message(request.id, exc))
            return
        except Exception as exc:  # a bug in a handler: answer it, keep serving everyone else
            self._internal_error(request, exc)
            return
        # The answer, and what ``after`` queues behind it, are written when this block ends,
        # from this task: no wakeup of the flusher's task per request (issue 30). Nothing
        # in it waits, so holding the flusher holds no other writer back.
        with self._flusher.held() if self._flusher is not None else contextlib.nullcontext():
            self.send_text(text)
            if reply.after is not None:
                try:
                    reply.after()
                except Exception as exc:  # the answer is out; say what could not follow it
                    self._internal_error(None, exc, f"after answering {shown(request.method)}")

    def _internal_error(self, request: Request | None, exc: Exception, where: str = "") -> None:
        """A bug met while serving this client: on stderr with its traceback, and told to
        the client (the request's error, else a ``warning``); the connection goes on."""
        traceback.print_exception(exc, file=sys.stderr)
        what = f"internal error in {shown(request.method) if request else where}: {type(exc).__name__}: {exc}"
        if request is not None:
            self.send(error_message(request.id, RpcError(what, code=INTERNAL_ERROR)))
        else:
            self.warn(what)

    async def _write_loop(self, done: trio.Event) -> None:
        outbox = self._outbox
        peer_gone = False
        try:
            while True:
                # What send_now's socket did not take is written first (by any send_batch).
                pending = not peer_gone and self._now is not None and self._now.pending
                if not outbox and not pending:
                    if self._outbox_closed:
                        return
                    self._writer_wake = wake = trio.Event()
                    await wake.wait()
                    continue
                # Everything queued goes in one write: the writer keeps up with a burst
                # (the pump queues in one step what took the agent many).
                batch = [outbox.popleft() for _ in range(min(len(outbox), WRITE_BATCH))]
                if peer_gone:  # it closed cleanly: what it asked is still served, the answers dropped
                    continue
                try:
                    await self._channel.send_batch(batch)
                except PeerClosed:  # no reader left, which is no failure
                    peer_gone = True
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.drop(f"its transport failed ({exc})")
        finally:
            done.set()
