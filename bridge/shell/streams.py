"""Message streams: one complete JSON-RPC message per ``receive()``.

Two framings carry JSON-RPC here: newline-delimited JSON over a byte stream
(stdio, subprocess pipes) and one message per WebSocket text frame. Both are
wrapped in the same small interface, :class:`MessageStream`, so the rest of
the shell never knows which it talks to. Both cap the size of one message.
"""

from __future__ import annotations

import logging
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

    async def aclose(self) -> None: ...


class LineStream:
    """Newline-delimited JSON over a trio byte stream (or a pair of them)."""

    def __init__(
        self,
        receive_stream: trio.abc.ReceiveStream,
        send_stream: trio.abc.SendStream,
        *,
        max_message: int = DEFAULT_MAX_MESSAGE,
    ) -> None:
        self._receive_stream = receive_stream
        self._send_stream = send_stream
        self._max = max_message
        self._buffer = bytearray()
        self._scan_from = 0
        self._discarding = False
        self._eof = False
        self._send_lock = trio.Lock()

    async def receive(self) -> bytes:
        while True:
            newline = self._buffer.find(b"\n", self._scan_from)
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                self._scan_from = 0
                if self._discarding:
                    self._discarding = False
                    continue
                line = line.strip()
                if line:
                    return line
                continue
            self._scan_from = len(self._buffer)
            if len(self._buffer) > self._max:
                # Drop what we have and the rest of this line when it comes:
                # the stream stays usable for the messages that follow.
                self._buffer.clear()
                self._scan_from = 0
                if not self._discarding:
                    self._discarding = True
                    raise MessageTooLarge(f"message larger than {self._max} bytes")
            if self._eof:
                if self._buffer.strip() and not self._discarding:
                    line = bytes(self._buffer).strip()
                    self._buffer.clear()
                    return line
                raise trio.EndOfChannel
            chunk = await self._receive_stream.receive_some(256 * 1024)
            if not chunk:
                self._eof = True
            else:
                self._buffer += chunk

    async def send(self, data: bytes) -> None:
        async with self._send_lock:
            await self._send_stream.send_all(data + b"\n")

    async def aclose(self) -> None:
        await self._send_stream.aclose()
        if self._receive_stream is not self._send_stream:
            await self._receive_stream.aclose()


class WebSocketStream:
    """One JSON-RPC message per text frame, over ``websockets.trio``."""

    def __init__(self, connection: object) -> None:
        # websockets.trio.connection.Connection; typed loosely to keep the
        # import (and its cost) inside the WebSocket transport only.
        self._ws = connection

    async def receive(self) -> bytes:
        from websockets.exceptions import ConnectionClosed

        try:
            message = await self._ws.recv()  # type: ignore[attr-defined]
        except ConnectionClosed as exc:
            raise trio.EndOfChannel(str(exc)) from exc
        return message.encode() if isinstance(message, str) else bytes(message)

    async def send(self, data: bytes) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self._ws.send(data, text=True)  # type: ignore[attr-defined]
        except ConnectionClosed as exc:
            raise trio.BrokenResourceError(str(exc)) from exc

    async def aclose(self) -> None:
        await self._ws.aclose()  # type: ignore[attr-defined]
