"""The daemon's page on the network: its files over HTTP, its live state over a WebSocket.

One ``websockets.trio`` server: ``process_request`` answers the plain HTTP requests
(the page's files, every refusal) as :mod:`.access` decides, and lets ``GET /ws`` from the
page's own origin become a WebSocket. That socket is sent nothing, and nothing it sends is
done, until its first message holds the daemon's secret (:func:`.access.admit`); a wrong or
missing one, or none within :data:`AUTH_SECONDS`, closes it (1008). Each open page gets what the
:class:`~.board.Board` says changed for it, pushed as it changes (at most one message per
:data:`MIN_INTERVAL`, so a stream of deltas is merged); nothing is sent, and nothing runs
for it, while nothing changes. Its actions are checked by the board and go to Codex on the
daemon's watcher connection (:class:`Hub`, fed by :mod:`bridge.daemon.observer`).

Bounded whoever connects: at most :data:`MAX_CONNECTIONS` connections at once (one more is
answered 503 and closed), a request must arrive within :data:`REQUEST_SECONDS`, a page's
message is at most :data:`MAX_ACTION` bytes (a larger one closes its socket, 1009), and
each message is read into a typed action or refused (:mod:`.actions`).
"""

from __future__ import annotations

import email.utils
import logging
import ssl as ssl_module
import time
import weakref
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import msgspec
import trio
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.trio.server import ServerConnection, serve

from ..picture import Picture
from .access import FILES, SECURITY_HEADERS, Access, Refuse, Serve, Upgrade, admit, check
from .actions import Refused, read_action
from .board import Board, Interrupt, View
from .inbox import Answer

log = logging.getLogger(__name__)
#: websockets' own log of every connection: only its warnings (each page load is several).
quiet = logging.getLogger(f"{__name__}.websockets")
quiet.setLevel(logging.WARNING)

#: The least time between two messages to one page: deltas arriving meanwhile go in one.
MIN_INTERVAL = 0.1
#: Notifications the board takes with no page open (the rest is work for a page only).
ALWAYS = frozenset(
    {"thread/status/changed", "serverRequest/resolved", "account/rateLimits/updated"}
)
#: How long a page's cancel waits for Codex's answer.
CODEX_SECONDS = 10.0
#: The largest action a page sends.
MAX_ACTION = 64 * 1024
#: The page's connections in flight at once, HTTP and WebSocket together (a page open in a
#: tab holds one; loading it takes three more, each closed once answered). One more is
#: refused at once (503), and those open go on being served.
MAX_CONNECTIONS = 64
#: How long a request (and a TLS handshake before it) may take to arrive: a client that
#: sends it slowly, or never, is cut off.
REQUEST_SECONDS = 10.0
#: How long a page's WebSocket may take to send its secret before it is closed.
AUTH_SECONDS = 5.0
#: The close code of a socket refused: policy violation.
REFUSED = 1008

Call = Callable[[str, Any], Awaitable[Any]]
Respond = Callable[[Any, Any], Awaitable[None]]


class _Wake:
    """Set when something may have changed for one page."""

    def __init__(self) -> None:
        self.event = trio.Event()

    def set(self) -> None:
        self.event.set()

    async def wait(self) -> None:
        await self.event.wait()
        self.event = trio.Event()


class Hub:
    """Between the watcher's connection to Codex and the open pages."""

    def __init__(self, board: Board, daemon: Callable[[], dict[str, Any]]) -> None:
        self.board = board
        self._daemon = daemon
        self._wakes: set[_Wake] = set()
        self._follow = trio.Event()
        self._call: Call | None = None
        self._respond: Respond | None = None
        self._poked = -1

    # -- the watcher's side -------------------------------------------------------------

    def poke(self) -> None:
        if self.board.version != self._poked:
            self._poked = self.board.version
            for wake in self._wakes:
                wake.set()

    def notification(self, method: str, params: bytes) -> None:
        if not self.board.pages and method not in ALWAYS:
            return
        try:
            decoded = msgspec.json.decode(params)
        except msgspec.DecodeError:
            return
        self.board.notification(method, decoded, time.time())
        self.poke()

    def request(self, request_id: Any, method: str, params: bytes) -> None:
        try:
            decoded = msgspec.json.decode(params)
        except msgspec.DecodeError:
            return
        if self.board.request(request_id, method, decoded, time.time()):
            self.poke()

    def machines_changed(self, machines: list[dict[str, Any]]) -> None:
        self.board.machines_changed(machines)
        self.poke()

    def watching(self, picture: Picture) -> None:
        """The watcher's picture of every thread (a new one at each connection)."""
        self.board.picture = picture
        self.picture_changed()

    def picture_changed(self) -> None:
        self.board.picture_changed()
        if self.board.pages or self.board.subscribed:
            # A thread to subscribe to for a page, or one a closed page left to leave.
            self._follow.set()
        self.poke()

    async def follow(self, call: Call, respond: Respond) -> None:
        """While the watcher's connection lasts: answer through it, and keep it subscribed
        to the threads the board says (every loaded one while a page is open)."""
        self._call, self._respond = call, respond
        limits_read = False
        try:
            while True:
                if self.board.pages and not limits_read:
                    # Codex tells its rate limits as they change; what they are now, once asked.
                    limits_read = True
                    answer = await call("account/rateLimits/read", {})
                    if isinstance(answer, bytes):
                        now = msgspec.json.decode(answer)
                        self.board.notification("account/rateLimits/updated", now, time.time())
                        self.poke()
                resume, leave = self.board.subscriptions()
                for thread_id in resume:
                    answer = await call("thread/resume", {"threadId": thread_id})
                    if isinstance(answer, bytes):
                        self.board.resumed(thread_id, msgspec.json.decode(answer))
                    else:
                        log.debug("the page's watcher could not resume %s: %s", thread_id, answer)
                        self.board.resume_failed(thread_id)
                    self.poke()
                for thread_id in leave:
                    await call("thread/unsubscribe", {"threadId": thread_id})
                    self.board.unsubscribed(thread_id)
                    self.poke()
                if not resume and not leave:
                    await self._follow.wait()
                    self._follow = trio.Event()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the connection ends: the watcher sees it too
        finally:
            self._call = self._respond = None
            self.board.lost()
            self.poke()

    # -- the pages' side ----------------------------------------------------------------

    async def page(self, websocket: ServerConnection) -> None:
        view = self.board.opened()
        self._follow.set()
        wake = _Wake()
        self._wakes.add(wake)
        try:
            await websocket.send(_encode(self.board.hello(view, self._daemon())))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._push, websocket, view, wake)
                async for text in websocket:
                    await self._act(websocket, view, text)
                    self.poke()
                    wake.set()
                nursery.cancel_scope.cancel()
        except* ConnectionClosed:
            pass  # the page went away
        finally:
            self._wakes.discard(wake)
            self.board.closed()
            self._follow.set()

    async def _push(self, websocket: ServerConnection, view: View, wake: _Wake) -> None:
        while True:
            await wake.wait()
            message = self.board.update(view)
            if message is not None:
                await websocket.send(_encode(message))
            await trio.sleep(MIN_INTERVAL)

    async def _act(self, websocket: ServerConnection, view: View, text: str | bytes) -> None:
        try:
            reason = await self._to_codex(view, text)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            reason = "Codex is away"
        if reason is not None:
            await websocket.send(_encode({"type": "refused", "reason": reason}))

    async def _to_codex(self, view: View, text: str | bytes) -> str | None:
        """Carry out a page's action; why not, when it is refused."""
        action = read_action(text)
        outcome = action if isinstance(action, Refused) else self.board.action(view, action)
        if isinstance(outcome, Refused):
            return outcome.reason
        if isinstance(outcome, Answer):
            if self._respond is None:
                self.board.answer_failed(outcome.request_id)
                return "Codex is away"
            log.info("the page answers Codex's request %s: %s", outcome.request_id, outcome.result)
            await self._respond(outcome.request_id, outcome.result)
        elif isinstance(outcome, Interrupt):
            if self._call is None:
                return "Codex is away"
            log.info("the page cancels the turn of %s", outcome.thread_id)
            params = {"threadId": outcome.thread_id, "turnId": outcome.turn_id}
            answer: Any = None
            with trio.move_on_after(CODEX_SECONDS):
                answer = await self._call("turn/interrupt", params)
            if not isinstance(answer, bytes):
                return str(getattr(answer, "message", None) or "Codex did not answer")
        return None


def _encode(message: Any) -> str:
    return msgspec.json.encode(message).decode()


class Files:
    """The page's static files, read once from the package."""

    def __init__(self) -> None:
        folder = resources.files(__package__) / "static"
        self._files = {name: (folder / name).read_bytes() for name in _names()}

    def __getitem__(self, name: str) -> bytes:
        return self._files[name]


def _names() -> list[str]:
    return [served.name for served in FILES.values()]


def answer_http(access: Access, files: Files, request: Request) -> Response | None:
    """The answer to a request before any WebSocket: ``None`` lets the handshake go on."""
    seen: dict[str, str] = {}
    for name in ("host", "origin"):
        values = request.headers.get_all(name)
        if len(values) > 1:
            return _response(400, "Bad Request", f"more than one {name}".encode(), "text/plain")
        if values:
            seen[name] = values[0]
    verdict = check(access, request.path, seen, request.method)
    if isinstance(verdict, Upgrade):
        return None
    if isinstance(verdict, Serve):
        return _response(200, "OK", files[verdict.name], verdict.content_type)
    assert isinstance(verdict, Refuse)
    log.info("the page refused %s: %s", request.path.split("?")[0], verdict.reason)
    return _response(verdict.status, verdict.reason, f"{verdict.reason}\n".encode(), "text/plain")


def _response(status: int, phrase: str, body: bytes, content_type: str) -> Response:
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", content_type),
            *SECURITY_HEADERS,
        ]
    )
    return Response(status, phrase, headers, body)


async def admitted(access: Access, websocket: ServerConnection) -> bool:
    """Whether the socket's first message holds the secret, within :data:`AUTH_SECONDS`;
    if not, the socket is closed, having been sent nothing."""
    reason = "no token in time"
    with trio.move_on_after(AUTH_SECONDS):
        try:
            first = await websocket.recv()
        except ConnectionClosed:
            return False
        refused = admit(access, first)
        if refused is None:
            return True
        reason = refused
    log.info("the page refused a WebSocket: %s", reason)
    await websocket.aclose(REFUSED, reason)
    return False


class _InFlight:
    """The page's connections open now: each one the listener hands on, until it is closed
    (or dropped: a weak set, so that a connection the server forgets is not counted)."""

    def __init__(self) -> None:
        self.open: weakref.WeakSet[_Counted] = weakref.WeakSet()
        #: Refusing since the last connection let in (the log says so once).
        self.refusing = False


class _Counted(trio.abc.HalfCloseableStream):
    """A connection counted in flight until it is closed."""

    def __init__(self, stream: trio.SocketStream, in_flight: _InFlight) -> None:
        self._stream = stream
        self._in_flight = in_flight
        in_flight.open.add(self)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        self._in_flight.open.discard(self)
        await self._stream.aclose()


#: What a connection past :data:`MAX_CONNECTIONS` is told before it is closed (without TLS).
_BUSY_BODY = b"too many connections to the page; try again\n"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)


class _Capped(trio.abc.Listener[_Counted]):
    """A listener that lets in at most :data:`MAX_CONNECTIONS` at once and refuses the rest."""

    def __init__(self, listener: trio.SocketListener, in_flight: _InFlight, *, tls: bool) -> None:
        self._listener = listener
        self._in_flight = in_flight
        self._tls = tls
        #: websockets logs the address it listens on.
        self.socket = listener.socket

    async def accept(self) -> _Counted:
        while True:
            stream = await self._listener.accept()
            if len(self._in_flight.open) < MAX_CONNECTIONS:
                self._in_flight.refusing = False
                return _Counted(stream, self._in_flight)
            if not self._in_flight.refusing:
                self._in_flight.refusing = True
                log.warning("the page refuses connections: %d are open already", MAX_CONNECTIONS)
            with trio.move_on_after(1):
                if not self._tls:  # a refusal in clear would not be understood over TLS
                    await stream.send_all(_BUSY)
            await trio.aclose_forcefully(stream)

    async def aclose(self) -> None:
        await self._listener.aclose()


async def serve_page(
    hub: Hub,
    access: Access,
    listeners: list[trio.SocketListener],
    *,
    ssl: ssl_module.SSLContext | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the page on ``listeners`` until cancelled."""
    files = Files()

    def process_request(_connection: ServerConnection, request: Request) -> Response | None:
        return answer_http(access, files, request)

    async def page(websocket: ServerConnection) -> None:
        if await admitted(access, websocket):
            await hub.page(websocket)

    in_flight = _InFlight()
    capped = [_Capped(listener, in_flight, tls=ssl is not None) for listener in listeners]
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: serve(
                page,
                # Any trio listener does: websockets hands them to trio.serve_listeners.
                listeners=capped,  # type: ignore[arg-type]
                ssl=ssl,
                process_request=process_request,
                server_header=None,
                compression=None,
                max_size=(MAX_ACTION, None),
                # A page left open costs nothing between changes but this ping.
                ping_interval=60,
                ping_timeout=30,
                open_timeout=REQUEST_SECONDS,
                logger=quiet,
                task_status=task_status,
            )
        )
        task_status.started()
