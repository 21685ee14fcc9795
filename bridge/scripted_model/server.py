"""A minimal HTTP/1.1 server on trio that answers Codex's Responses-API requests from a script.

One request per connection: every response carries ``Connection: close``, which also lets an event
stream end by closing the socket (no chunked encoding needed). Codex's HTTP client honours it and
opens a new connection for its next request. The server only ever binds a 127.x.x.x address.

While a stream is being sent, the server also watches the socket: when Codex closes it (an
interrupted turn), the rest of the script is dropped at once instead of at the next write. A client
must therefore not half-close its side after the request, which no HTTP client does by default.
"""

from __future__ import annotations

import ipaddress
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import trio

from .directives import SseEvent, answer_request, codex_internal_purpose, encode_sse

__all__ = [
    "HttpError",
    "RequestHead",
    "ScriptedModel",
    "parse_request_head",
    "serve_scripted_model",
]

logger = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
#: A client that has not sent its whole request after this many seconds is dropped.
READ_TIMEOUT = 30.0
#: Events without delays go out in writes of about this size (20,000 words are a few megabytes).
SEND_BATCH_BYTES = 256 * 1024

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    431: "Request Header Fields Too Large",
}


class HttpError(Exception):
    """The request cannot be served: answered with ``status`` and a JSON error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class RequestHead:
    method: str
    path: str
    headers: dict[str, str]


def parse_request_head(head: bytes) -> RequestHead:
    """Parse a request line and its header lines (without the blank line that ends them).

    Header names are lower-cased; the query string is dropped from the path. Anything that is not
    HTTP/1.x raises ``HttpError(400)``.
    """
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if (
        len(parts) != 3
        or not parts[0].isalpha()
        or not parts[1].startswith("/")
        or not parts[2].startswith("HTTP/1.")
    ):
        raise HttpError(400, f"bad request line {lines[0][:200]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or " " in name:
            raise HttpError(400, f"bad header line {line[:200]!r}")
        name = name.lower()
        value = value.strip()
        # A repeated header is one comma-separated list (RFC 9110, section 5.3).
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return RequestHead(parts[0], parts[1].split("?", 1)[0], headers)


class _Reader:
    """Buffered reads from a byte stream: up to a delimiter, or an exact count."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()

    async def _fill(self) -> bool:
        data = await self._stream.receive_some(65536)
        self._buffer += data
        return bool(data)

    async def until(self, delimiter: bytes, limit: int, what: str) -> bytes | None:
        """The bytes before ``delimiter`` (consumed); ``None`` if the stream ends before any."""
        start = 0
        while (end := self._buffer.find(delimiter, start)) < 0:
            if len(self._buffer) > limit:
                raise HttpError(431 if what == "head" else 400, f"{what} over {limit} bytes")
            start = max(0, len(self._buffer) - len(delimiter) + 1)
            if not await self._fill():
                if self._buffer:
                    raise HttpError(400, f"connection closed inside the {what}")
                return None
        data = bytes(self._buffer[:end])
        del self._buffer[: end + len(delimiter)]
        return data

    async def exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:
            if not await self._fill():
                raise HttpError(400, "connection closed inside the body")
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data


async def _read_chunked(reader: _Reader) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.until(b"\r\n", 1024, "chunk size")
        try:
            size = int((size_line or b"").split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise HttpError(400, "bad chunk size") from None
        if size == 0:
            # Trailer fields, up to the blank line that ends the message, are ignored.
            while await reader.until(b"\r\n", MAX_HEAD_BYTES, "trailer"):
                pass
            return b"".join(chunks)
        total += size
        if total > MAX_BODY_BYTES:
            raise HttpError(413, f"body over {MAX_BODY_BYTES} bytes")
        chunks.append(await reader.exactly(size))
        if await reader.exactly(2) != b"\r\n":
            raise HttpError(400, "chunk not followed by CRLF")


async def _read_body(reader: _Reader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked(reader)
    length_text = headers.get("content-length", "0")
    if not length_text.isdigit():
        raise HttpError(400, f"bad content-length {length_text!r}")
    length = int(length_text)
    if length > MAX_BODY_BYTES:
        raise HttpError(413, f"body over {MAX_BODY_BYTES} bytes")
    return await reader.exactly(length)


def _response_head(status: int, headers: Sequence[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines += ["Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


async def _send_json(
    stream: trio.abc.SendStream,
    status: int,
    payload: object,
    extra: Sequence[tuple[str, str]] = (),
) -> None:
    body = msgspec.json.encode(payload)
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *extra]
    await stream.send_all(_response_head(status, headers) + body)


async def _send_events(
    stream: trio.abc.SendStream,
    events: Sequence[SseEvent],
    extra: Sequence[tuple[str, str]] = (),
) -> None:
    """Send ``events`` as an event stream; a run of events without delays goes out in big writes."""
    headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), *extra]
    await stream.send_all(_response_head(200, headers))
    batch: list[SseEvent] = []
    batch_size = 0
    for event in events:
        if batch and (event.delay > 0 or batch_size >= SEND_BATCH_BYTES):
            await stream.send_all(encode_sse(batch))
            batch, batch_size = [], 0
        if event.delay > 0:
            await trio.sleep(event.delay)
        batch.append(event)
        # Deltas are what is numerous; a rough size of them keeps the writes near the target.
        batch_size += 100 + len(event.data.get("delta", ""))
    if batch:
        await stream.send_all(encode_sse(batch))


async def _cancel_at_eof(stream: trio.abc.ReceiveStream, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` when the peer closes its side (it sends nothing after its request)."""
    try:
        while await stream.receive_some(4096):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    scope.cancel()


@dataclass(eq=False)
class ScriptedModel:
    """A running scripted model: where it listens and what it was asked.

    ``requests`` holds every decoded ``/responses`` body in arrival order, ``request_headers`` the
    headers that came with each (lower-case names; ``thread-id`` tells Codex's threads apart), and
    ``cut_short`` the ids (``resp_N``, N counting requests from 1) of the replies whose stream the
    client closed before its end, as Codex does when a turn is interrupted.
    """

    host: str
    port: int
    requests: list[dict[str, Any]] = field(default_factory=list)
    request_headers: list[dict[str, str]] = field(default_factory=list)
    cut_short: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)
    _changed: trio.Event = field(default_factory=trio.Event, repr=False)

    async def wait_until(self, condition: Callable[[ScriptedModel], bool]) -> None:
        """Return once ``condition(self)`` holds; checked again after each request and cut."""
        while not condition(self):
            await self._changed.wait()

    def _note_change(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    @property
    def base_url(self) -> str:
        """The provider ``base_url`` for Codex's config: ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    async def handle_connection(self, stream: trio.abc.Stream) -> None:
        """Serve one request on ``stream``, then close it."""
        try:
            try:
                with trio.fail_after(READ_TIMEOUT):
                    reader = _Reader(stream)
                    head_bytes = await reader.until(b"\r\n\r\n", MAX_HEAD_BYTES, "head")
                    if head_bytes is None:
                        return
                    head = parse_request_head(head_bytes)
                    body = await _read_body(reader, head.headers)
                await self._respond(stream, head, body)
            except HttpError as exc:
                logger.warning("answering %d: %s", exc.status, exc.message)
                error = {"error": {"message": exc.message, "code": exc.status}}
                await _send_json(stream, exc.status, error)
            except trio.TooSlowError:
                logger.warning("dropping a client that sent no whole request in %ss", READ_TIMEOUT)
        except* (trio.BrokenResourceError, trio.ClosedResourceError):
            # Also when it surfaces from the response's nursery as a group: a client
            # that hangs up (Codex killed mid-stream) must not take the server down.
            logger.info("client closed the connection before the whole response")
        finally:
            await stream.aclose()

    async def _respond(self, stream: trio.abc.Stream, head: RequestHead, body: bytes) -> None:
        if not head.path.endswith("/responses"):
            raise HttpError(404, f"no route for {head.method} {head.path}")
        if head.method != "POST":
            raise HttpError(405, f"{head.path} takes POST, not {head.method}")
        encoding = head.headers.get("content-encoding", "identity").lower()
        if encoding != "identity":
            raise HttpError(415, f"content-encoding {encoding} is not supported")
        try:
            decoded = msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            raise HttpError(400, f"body is not JSON: {exc}") from None
        if not isinstance(decoded, dict):
            raise HttpError(400, "body is not a JSON object")
        self.requests.append(decoded)
        self.request_headers.append(head.headers)
        self._note_change()
        response_id = f"resp_{next(self._ids)}"
        answer = answer_request(decoded, head.headers, response_id=response_id)
        events = answer.events()
        purpose = codex_internal_purpose(decoded, head.headers)
        logger.info(
            "%s %s thread-id=%s%s -> %s (%d events)",
            head.method,
            head.path,
            head.headers.get("thread-id", "-"),
            f" codex-internal={purpose}" if purpose else "",
            response_id,
            len(events),
        )
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("headers %s\nbody %s", head.headers, body.decode("utf-8", "replace"))
        extra = list(answer.headers.items())
        if answer.refusal is not None:
            status, payload = answer.refusal
            await _send_json(stream, status, payload, extra)
            return
        sent = False
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_at_eof, stream, nursery.cancel_scope)
            await _send_events(stream, events, extra)
            sent = True
            nursery.cancel_scope.cancel()
        if not sent:
            logger.info("%s: the client closed the stream before its end", response_id)
            self.cut_short.append(response_id)
            self._note_change()


async def serve_scripted_model(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: trio.TaskStatus[ScriptedModel] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the scripted model forever on ``host:port`` (port 0: any free one).

    ``model = await nursery.start(serve_scripted_model)`` returns the ``ScriptedModel``: its
    ``base_url`` for ``write_codex_home`` and the ``requests`` it has seen. 127.x.x.x only.
    """
    try:
        loopback = ipaddress.IPv4Address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"the scripted model listens on 127.x.x.x only, not {host!r}")
    listeners = await trio.open_tcp_listeners(port, host=host)
    model = ScriptedModel(host, listeners[0].socket.getsockname()[1])
    logger.info("scripted model listening on %s", model.base_url)
    task_status.started(model)
    await trio.serve_listeners(model.handle_connection, listeners)
