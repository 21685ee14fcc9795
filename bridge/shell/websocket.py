"""A WebSocket client over trio, on websockets' Sans-I/O core: how the bridge reaches Codex's
app-server at ``--codex-url``, the daemon's, or Codex's own daemon.

websockets' ``ClientProtocol`` is public and made for this ("Integrate the Sans-I/O layer" in
websockets' docs): bytes read go in (``receive_data``), frames come out
(``events_received``), and it says what to write (``data_to_send``), pongs and the closing
handshake included. This module is the I/O around it: the socket (TCP, TLS for ``wss://``, a
Unix socket for Codex's daemon), the opening handshake, one reader task, sends, keepalive
pings, and the closing handshake.

Why not websockets' own trio connection: it hands a consumer one message per turn of the
scheduler, and a reader that keeps up with Codex needs every message one read brought at
once (:class:`WebSocketInbox`), which its public interface does not offer: it took a
subclass overriding how websockets handles each frame, which websockets keeps private. And
the only bound it offers on what it holds counts frames, not bytes. Here the reader puts each
read's messages in the inbox, and does not read the socket again while the inbox holds
:data:`INBOX_LIMIT` bytes nobody has taken: memory stays bounded whatever Codex sends, and a
full socket is Codex's to wait on (or to drop: docs/operations.md, "Slow clients").
"""

from __future__ import annotations

import contextlib
import math
import os
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from .streams import WaitingSends

if TYPE_CHECKING:
    from websockets.client import ClientProtocol
    from websockets.uri import WebSocketURI

#: Seconds to open the socket and finish the opening handshake.
OPEN_TIMEOUT = 10.0
#: Seconds the closing handshake may take before the socket is closed regardless.
CLOSE_TIMEOUT = 3.0
#: A ping this often; no pong as long after it, and the connection counts as dead (a peer
#: gone without closing its socket: a machine that went away, a link that dropped).
PING_INTERVAL = 20.0
PING_TIMEOUT = 20.0
#: Bytes of messages read and not yet taken past which the socket is not read.
INBOX_LIMIT = 8 * 1024 * 1024

_ENDED = (trio.BrokenResourceError, trio.ClosedResourceError)


#: Most messages a WebSocket hands out in a row without a turn of the scheduler (a read of
#: 64 KiB holds some 300 deltas: reading outpaces the engine when it cannot keep up).
TURN_EVERY = 64


class WebSocketInbox:
    """The messages a WebSocket's reader task has read off the socket, whole and in order.

    That task parses every frame one read brought (:meth:`WebSocket.read`); what it parsed is
    taken from here by :meth:`WebSocketStream.receive` without a turn of the scheduler per
    message, as :class:`~bridge.shell.streams.LineStream` hands out the lines of one read. Handed out
    one turn each instead, messages pile up here unseen by the engine, whose outbox merges for
    a slow client only what it has been given: behind a client that stopped reading, the
    bridge then falls behind Codex, and the backlog reaches the client unmerged.

    The reader still gets a turn every :data:`TURN_EVERY` messages handed out: to read on
    while the consumer is busy, so Codex never finds its socket full. It reads only while the
    messages here hold fewer than ``limit`` bytes (:meth:`wait_for_room`): what nobody takes
    stays bounded, and waits in the socket instead.
    """

    __slots__ = ("_arrived", "_fragments", "_room", "_run", "closed", "limit", "messages", "size")

    def __init__(self, *, limit: float = math.inf) -> None:
        self.messages: deque[bytes] = deque()
        #: Bytes of :attr:`messages`.
        self.size = 0
        self.limit = limit
        self._fragments: list[bytes] = []
        self._arrived = trio.lowlevel.ParkingLot()
        self._room = trio.lowlevel.ParkingLot()
        #: Messages handed out since the last turn of the scheduler.
        self._run = 0
        self.closed = False

    def put(self, data: bytes, *, fin: bool) -> None:
        """One data frame (the first of a message, or a continuation of it)."""
        if not fin:
            self._fragments.append(data)
            return
        if self._fragments:
            self._fragments.append(data)
            data = b"".join(self._fragments)
            self._fragments = []
        self.messages.append(data)
        self.size += len(data)
        if self._arrived:
            self._arrived.unpark_all()

    def close(self) -> None:
        self.closed = True
        self._arrived.unpark_all()

    def discard(self) -> None:
        """Forget what waits (nobody will take it): the reader reads on."""
        self.messages.clear()
        self.size = 0
        self.limit = math.inf
        self._room.unpark_all()

    async def wait_for_room(self) -> None:
        """Until the messages here hold fewer than ``limit`` bytes: at once, without a turn of
        the scheduler, when they do (the read that follows is the reader's checkpoint)."""
        while self.size >= self.limit:
            await self._room.park()

    async def get(self) -> bytes:
        """The next message; ``EOFError`` once the connection has ended and all are taken."""
        messages = self.messages
        if messages and self._run < TURN_EVERY:
            self._run += 1
            return self._taken(messages.popleft())
        if messages:
            await trio.lowlevel.checkpoint()
        while not messages:
            if self.closed:
                raise EOFError
            await self._arrived.park()
        self._run = 1
        return self._taken(messages.popleft())

    def _taken(self, data: bytes) -> bytes:
        self.size -= len(data)
        if self._room and self.size < self.limit:
            self._room.unpark_all()
        return data


class WebSocket:
    """One client connection, made by :func:`open_websocket`: :meth:`send` a text message;
    what arrives is taken from :attr:`inbox`; :attr:`protocol` says how it closed."""

    def __init__(self, stream: trio.abc.Stream, protocol: ClientProtocol, inbox_limit: int) -> None:
        self._stream = stream
        self.protocol = protocol
        self.inbox = WebSocketInbox(limit=inbox_limit)
        self._send_lock = trio.Lock()
        #: The opening handshake's response arrived, or the connection ended before it did.
        self._answered = trio.Event()
        #: The socket is closed: nothing more arrives.
        self.closed = trio.Event()
        #: When the socket is closed even if the server has not closed it (once a close
        #: frame went either way).
        self._close_deadline = math.inf
        #: The keepalive ping waiting for its pong: its payload, and what its pong sets.
        self._ping: tuple[bytes, trio.Event] | None = None

    async def read(self) -> None:
        """Read the socket until it ends: what the protocol answers is written at once, each
        message goes in the inbox; never while the inbox is full."""
        from websockets.frames import Frame, Opcode

        data_opcodes = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)
        protocol, inbox = self.protocol, self.inbox
        try:
            while True:
                await inbox.wait_for_room()
                data: bytes | bytearray = b""
                with trio.move_on_at(self._close_deadline), contextlib.suppress(*_ENDED):
                    data = await self._stream.receive_some()
                if not data:
                    break
                protocol.receive_data(data)
                events = protocol.events_received()
                try:
                    await self._send_pending()
                except _ENDED:
                    break
                if protocol.close_expected() and self._close_deadline == math.inf:
                    self._close_deadline = trio.current_time() + CLOSE_TIMEOUT
                for event in events:
                    if type(event) is Frame:
                        if event.opcode in data_opcodes:
                            inbox.put(bytes(event.data), fin=event.fin)
                        elif event.opcode is Opcode.PONG:
                            self._ponged(bytes(event.data))
                    else:  # the opening handshake's response
                        self._answered.set()
        finally:
            protocol.receive_eof()  # its state is CLOSED from now on (and close_exc says why)
            await trio.aclose_forcefully(self._stream)
            inbox.close()
            self._answered.set()
            self.closed.set()

    async def open(self, headers: Mapping[str, str]) -> None:
        """The opening handshake (the reader running): returns once the connection is open;
        raises what the protocol found wrong (``InvalidStatus``: refused, such as HTTP 401)."""
        from websockets.exceptions import InvalidHandshake
        from websockets.http11 import USER_AGENT
        from websockets.protocol import State

        request = self.protocol.connect()
        request.headers.update(headers)
        request.headers.setdefault("User-Agent", USER_AGENT)
        self.protocol.send_request(request)
        await self._send_pending()
        await self._answered.wait()
        if self.protocol.handshake_exc is not None:
            raise self.protocol.handshake_exc
        if self.protocol.state is not State.OPEN:
            raise InvalidHandshake("the connection closed during the opening handshake")

    async def send(self, data: bytes) -> None:
        """One text message; ``trio.BrokenResourceError`` once the connection is closing."""
        from websockets.protocol import State

        if self.protocol.state is not State.OPEN:
            raise trio.BrokenResourceError(f"WebSocket {self.protocol.state.name.lower()}")
        self.protocol.send_text(data)
        await self._send_pending()

    async def _send_pending(self) -> None:
        # One writer at a time: the reader answers pings and closes while others send.
        async with self._send_lock:
            for data in self.protocol.data_to_send():
                if data:
                    await self._stream.send_all(data)
                elif isinstance(self._stream, trio.abc.HalfCloseableStream):
                    # The protocol's end of the stream: half-close; the reader closes the rest.
                    with contextlib.suppress(*_ENDED):
                        await self._stream.send_eof()

    async def keepalive(self) -> None:
        """Ping every :data:`PING_INTERVAL`; a connection whose pong does not come within
        :data:`PING_TIMEOUT` is failed and closed (the reader then ends)."""
        from websockets.frames import CloseCode
        from websockets.protocol import State

        while True:
            await trio.sleep(PING_INTERVAL)
            if self.protocol.state is not State.OPEN:
                return
            payload, ponged = os.urandom(4), trio.Event()
            self._ping = (payload, ponged)
            self.protocol.send_ping(payload)
            try:
                await self._send_pending()
            except _ENDED:
                return
            with trio.move_on_after(PING_TIMEOUT):
                await ponged.wait()
                continue
            self.protocol.fail(CloseCode.INTERNAL_ERROR, "keepalive ping timeout")
            with contextlib.suppress(*_ENDED):
                await self._send_pending()
            await trio.aclose_forcefully(self._stream)
            return

    def _ponged(self, payload: bytes) -> None:
        if self._ping is not None and self._ping[0] == payload:
            self._ping[1].set()
            self._ping = None

    async def aclose(self) -> None:
        """The closing handshake, within :data:`CLOSE_TIMEOUT`; the socket is closed whatever
        happens (at once when cancelled)."""
        from websockets.protocol import State

        # Nobody takes what waits now: the reader reads on, to the server's close frame.
        self.inbox.discard()
        try:
            if self.protocol.state is State.OPEN:
                self.protocol.send_close()
                with contextlib.suppress(*_ENDED):
                    await self._send_pending()
            with trio.move_on_after(CLOSE_TIMEOUT):
                await self.closed.wait()
        finally:
            await trio.aclose_forcefully(self._stream)


@asynccontextmanager
async def open_websocket(
    url: str, *, unix_socket: str | None = None, headers: Mapping[str, str], max_size: int
) -> AsyncIterator[WebSocket]:
    """A WebSocket connection to ``url`` (over ``unix_socket`` when given: the URL then only
    names the request), open until the block ends. Raises ``OSError`` (no connection),
    ``TimeoutError`` (not open within :data:`OPEN_TIMEOUT`), or websockets'
    ``InvalidURI`` / ``InvalidHandshake`` (``InvalidStatus``: refused, with its response)."""
    from websockets.client import ClientProtocol
    from websockets.uri import parse_uri

    uri = parse_uri(url)
    deadline = trio.current_time() + OPEN_TIMEOUT
    with trio.move_on_at(deadline) as opening:
        stream = await _open_stream(uri, unix_socket)
    if opening.cancelled_caught:
        raise TimeoutError(f"timed out connecting to {url}")
    ws = WebSocket(stream, ClientProtocol(uri, max_size=max_size), INBOX_LIMIT)
    try:
        async with _tasks() as nursery:
            nursery.start_soon(ws.read)
            with trio.move_on_at(deadline):
                await ws.open(headers)
            if not ws._answered.is_set():
                raise TimeoutError(f"timed out during the opening handshake with {url}")
            nursery.start_soon(ws.keepalive)
            try:
                yield ws
            finally:
                try:
                    await ws.aclose()
                finally:
                    nursery.cancel_scope.cancel()
    finally:
        await trio.aclose_forcefully(stream)


async def _open_stream(uri: WebSocketURI, unix_socket: str | None) -> trio.abc.Stream:
    if unix_socket is not None:
        return await trio.open_unix_socket(unix_socket)
    stream: trio.abc.Stream = await trio.open_tcp_stream(uri.host, uri.port)
    if uri.secure:
        import ssl

        tls = trio.SSLStream(
            stream, ssl.create_default_context(), server_hostname=uri.host, https_compatible=True
        )
        try:
            await tls.do_handshake()
        except trio.BrokenResourceError as exc:  # what trio makes of ssl's errors
            await trio.aclose_forcefully(stream)
            raise OSError(f"TLS handshake failed: {exc.__cause__ or exc}") from exc
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        stream = tls
    return stream


@asynccontextmanager
async def _tasks() -> AsyncIterator[trio.Nursery]:
    """A nursery for tasks that raise nothing (they end, or are cancelled): what leaves it is
    the block's own exception as it was raised, not in a group, so that callers catch what
    they expect (websockets' own connections do the same; trio's docs, "Designing for
    multiple errors")."""
    try:
        async with trio.open_nursery() as nursery:
            yield nursery
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1 and not isinstance(group.exceptions[0], BaseExceptionGroup):
            only = group.exceptions[0]
            raise only from only.__cause__
        raise


class WebSocketStream(WaitingSends):
    """One JSON-RPC message per text frame, over a :class:`~bridge.shell.websocket.WebSocket`."""

    def __init__(self, connection: WebSocket) -> None:
        self._ws = connection
        self._inbox = connection.inbox

    async def receive(self) -> bytes:
        try:
            return await self._inbox.get()
        except EOFError:
            # The reader has ended: the protocol is closed, and says how.
            raise trio.EndOfChannel(str(self._ws.protocol.close_exc)) from None

    async def send(self, data: bytes) -> None:
        await self._ws.send(data)  # one frame per message: that is the framing

    async def send_batch(self, messages: list[bytes]) -> None:
        for data in messages:
            await self._ws.send(data)

    async def aclose(self) -> None:
        await self._ws.aclose()
