"""Message streams: one complete JSON-RPC message per ``receive()``.

Two framings carry JSON-RPC: newline-delimited JSON over a byte stream (stdio,
subprocess pipes: :class:`LineStream`, here) and one message per WebSocket text
frame (:class:`~bridge.shell.websocket.WebSocketStream`). Both are wrapped in the
same small interface, :class:`MessageStream`, so the rest of the shell never knows
which it talks to. Both cap the size of one message.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from typing import Protocol

import trio

log = logging.getLogger(__name__)

#: Largest message accepted by default (images arrive base64-encoded in prompts).
DEFAULT_MAX_MESSAGE = 64 * 1024 * 1024


class MessageTooLarge(Exception):
    """One message was bigger than the stream's cap; it was discarded whole."""


class MessageStream(Protocol):
    async def receive(self) -> bytes:
        """The next message; raises ``trio.EndOfChannel`` when the peer is done."""
        ...

    async def send(self, data: bytes) -> None: ...

    async def send_batch(self, messages: list[bytes]) -> None:
        """Send several messages in order (the list may be consumed)."""
        ...

    def send_nowait(self, data: bytes) -> bool:
        """Send one message at once, from the calling task, where the stream can without
        waiting; ``False``: nothing was sent (send it as usual). Part of it may stay
        unsent (:attr:`unsent`) until :meth:`flush`, which must come before any other send."""
        ...

    @property
    def unsent(self) -> int:
        """Bytes of a message :meth:`send_nowait` began and did not finish."""
        ...

    async def flush(self) -> None:
        """Finish the message :meth:`send_nowait` began."""
        ...

    async def aclose(self) -> None: ...


class WaitingSends:
    """For a stream that sends only by waiting (a WebSocket's frames): nothing at once."""

    def send_nowait(self, data: bytes) -> bool:
        return False

    @property
    def unsent(self) -> int:
        return 0

    async def flush(self) -> None:
        pass


class LineStream:
    """Newline-delimited JSON over a trio byte stream (or a pair of them).

    Complete lines are split off each chunk as it arrives (one pass, no
    per-line copying of the rest of the buffer); a line longer than
    ``max_message`` is dropped whole and reported once as
    :class:`MessageTooLarge`, and the stream carries on with the next line.
    """

    def __init__(
        self,
        receive_stream: trio.abc.ReceiveStream,
        send_stream: trio.abc.SendStream | None,
        *,
        max_message: int = DEFAULT_MAX_MESSAGE,
        received: bytes = b"",
    ) -> None:
        """``send_stream`` may be ``None`` for a stream that is only read (a log pipe);
        ``received``: bytes of the stream already read elsewhere, which come first."""
        self._receive_stream = receive_stream
        self._send_stream = send_stream
        self._max = max_message
        self._lines: deque[bytes | None] = deque()  # None marks a dropped, oversized line
        self._partial: list[bytes] = []
        self._partial_size = 0
        self._discarding = False
        self._eof = False
        self._send_lock = trio.Lock()
        #: The pipe written directly by :meth:`send_nowait` (``None``: not a pipe).
        self._fd: int | None = None
        if isinstance(send_stream, trio.lowlevel.FdStream):
            self._fd = send_stream.fileno()
        #: What a pipe did not take of the message :meth:`send_nowait` wrote.
        self._unsent = b""
        if received:
            self._feed(received)

    async def receive(self) -> bytes:
        while True:
            while self._lines:
                line = self._lines.popleft()
                if line is None:
                    raise MessageTooLarge(f"message larger than {self._max} bytes")
                line = line.strip()
                if line:
                    return line
            if self._eof:
                raise trio.EndOfChannel
            chunk = await self._receive_stream.receive_some(256 * 1024)
            if not chunk:
                self._eof = True
                self._end_line()
            else:
                self._feed(chunk)

    def _feed(self, chunk: bytes | bytearray) -> None:
        pieces = bytes(chunk).split(b"\n")  # bytes(...) copies only a bytearray
        if len(pieces) > 1:
            self._add_partial(pieces[0])
            self._end_line()
            # The lines wholly inside this chunk: the hot path, kept to one check each.
            lines, limit = self._lines, self._max
            for index in range(1, len(pieces) - 1):
                piece = pieces[index]
                lines.append(piece if len(piece) <= limit else None)
        self._add_partial(pieces[-1])

    def _add_partial(self, piece: bytes) -> None:
        if self._discarding or not piece:
            return
        self._partial_size += len(piece)
        if self._partial_size > self._max:
            # Drop what we have and the rest of this line when it comes.
            self._partial.clear()
            self._discarding = True
            self._lines.append(None)
        else:
            self._partial.append(piece)

    def _end_line(self) -> None:
        if self._partial:
            self._lines.append(b"".join(self._partial))
        self._partial = []
        self._partial_size = 0
        self._discarding = False

    def _sender(self) -> trio.abc.SendStream:
        if self._send_stream is None:
            raise trio.ClosedResourceError("this stream is receive-only")
        return self._send_stream

    async def send(self, data: bytes) -> None:
        await self._send(data + b"\n")

    async def send_batch(self, messages: list[bytes]) -> None:
        """Several messages in one write: far fewer syscalls for a stream of deltas."""
        messages.append(b"")
        await self._send(b"\n".join(messages))

    def send_nowait(self, data: bytes) -> bool:
        """Write the message into the pipe now, if no write is under way: a pipe with room
        takes it whole at once, where a send through trio costs the writing task turns of
        the scheduler before and after (a third of the bridge's own time for a small
        request and its answer, measured). What a full pipe did not take stays in
        :attr:`unsent` for :meth:`flush`."""
        if self._fd is None or self._unsent or self._send_lock.locked():
            return False
        line = data + b"\n"
        try:
            sent = os.write(self._fd, line)
        except OSError:  # full (BlockingIOError), or gone: the usual send says which
            return False
        self._unsent = line[sent:]
        return True

    @property
    def unsent(self) -> int:
        return len(self._unsent)

    async def flush(self) -> None:
        await self._send(b"")

    async def _send(self, data: bytes) -> None:
        # The lock is free but for a write under way: taken at once, a write waits for no
        # turn of the scheduler before its own (send_all checkpoints anyway).
        try:
            self._send_lock.acquire_nowait()
        except trio.WouldBlock:
            await self._send_lock.acquire()
        try:
            if self._unsent:  # the rest of a message begun at once goes first
                data, self._unsent = self._unsent + data, b""
            await self._sender().send_all(data)
        finally:
            self._send_lock.release()

    async def aclose(self) -> None:
        if self._send_stream is not None:
            await self._send_stream.aclose()
        if self._receive_stream is not self._send_stream:  # type: ignore[comparison-overlap]
            await self._receive_stream.aclose()
