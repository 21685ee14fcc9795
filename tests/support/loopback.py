"""A stand-in server on a fresh loopback port, for tests that need something to connect to."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

import trio


async def serve_loopback(
    nursery: trio.Nursery, handler: Callable[[trio.SocketStream], Awaitable[object]]
) -> int:
    """Serve ``handler`` (a task a connection) on 127.0.0.1 for the life of ``nursery``;
    the port it listens on, listening already when this returns."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    nursery.start_soon(trio.serve_listeners, handler, listeners)
    return int(listeners[0].socket.getsockname()[1])


async def request_head(stream: trio.SocketStream) -> bytes | None:
    """What an HTTP client sent up to the end of its request's head (all of what was read,
    the start of a body with it), ``None`` if it closed before."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        data += chunk
    return data


async def refuse_for_lack_of_a_key(stream: trio.SocketStream) -> None:
    """OpenAI's answer to a request without credentials: 401 ``invalid_api_key``, closed."""
    body = b'{"error":{"message":"You did not provide an API key.","code":"invalid_api_key"}}'
    head = (
        "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
        f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    await stream.send_all(head.encode() + body)
    await stream.aclose()


class HttpRequest(NamedTuple):
    method: str
    path: str
    #: Names lower-case.
    headers: dict[str, str]
    body: bytes


async def http_requests(stream: trio.SocketStream) -> AsyncIterator[HttpRequest]:
    """The requests a client sends on one keep-alive connection, each with its body (by
    ``content-length``), until it closes."""
    buffer = b""
    while True:
        while b"\r\n\r\n" not in buffer:
            data = await stream.receive_some(65536)
            if not data:
                return
            buffer += data
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path = request_line.split(" ")[:2]
        headers = {
            k.strip().lower(): v.strip()
            for k, v in (line.split(":", 1) for line in header_lines if ":" in line)
        }
        length = int(headers.get("content-length", "0"))
        while len(buffer) < length:
            data = await stream.receive_some(65536)
            if not data:
                return
            buffer += data
        body, buffer = buffer[:length], buffer[length:]
        yield HttpRequest(method, path, headers, body)


async def http_request(
    port: int, target: str, host: str, *, method: str = "GET", address: str = "127.0.0.1"
) -> tuple[int, str, bytes]:
    """One plain HTTP/1.1 request, ``Host: host``, to ``address:port``, read to the server's
    close: the status, the head, the body."""
    stream = await trio.open_tcp_stream(address, port)
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    await stream.aclose()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode(), body


def token_file(folder: Path, token: str) -> Path:
    """A capability token's file in ``folder``, as a user keeps it: ``token`` and a newline,
    readable by its owner alone."""
    path = folder / "token"
    path.write_text(f"{token}\n")
    path.chmod(0o600)
    return path
