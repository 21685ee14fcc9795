"""The daemon's own connection to its Codex: it watches every thread and keeps the picture.

Codex sends ``thread/status/changed`` and ``thread/started`` to every initialized
connection, so one connection that subscribes to nothing sees every thread's
status, including threads other clients run. At connect it lists every thread
(every source kind, sub-agents included) and reads each loaded one not listed (a
thread not prompted yet is loaded but not stored); a thread first seen through its status
(Codex sends no ``thread/started`` for a sub-agent) is read. After each change the
picture is handed to ``publish`` (the daemon writes it to ``status.json``).

On its own it answers nothing Codex asks: Codex sends some requests (a sub-agent's
approval) to every connection and takes the first answer, which must be an editor's,
or a person's on the daemon's page: with a ``hub`` (:mod:`bridge.daemon.page.server`),
what Codex says and asks is handed to the page too, and the page's answers and cancels
go to Codex on this connection, which then subscribes to the threads a page shows.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from .. import __version__
from ..codex import threads as codex_threads
from ..codex import types as codex_types
from ..jsonrpc import IncomingError, IncomingNotification, IncomingRequest, IncomingResponse, Peer
from ..shell.codex_transport import CodexUnavailable, connect_codex
from .picture import Picture

if TYPE_CHECKING:
    from ..engine import MachineOffer
    from .page.server import Hub

log = logging.getLogger(__name__)

#: Every kind of thread Codex lists (``ThreadSourceKind``), so sub-agents are listed too.
SOURCE_KINDS = [
    "cli",
    "vscode",
    "exec",
    "appServer",
    "subAgent",
    "subAgentReview",
    "subAgentCompact",
    "subAgentThreadSpawn",
    "subAgentOther",
    "unknown",
]
#: Pages of ``thread/list`` read at connect (100 threads each).
MAX_PAGES = 20
#: How long a thread's read waits for Codex's answer: one that never comes (a thread
#: Codex is busy loading) is given up, not waited for while Codex lives.
READ_SECONDS = 30.0


class _StatusChanged(msgspec.Struct):
    threadId: str
    status: dict[str, Any]


class _NameUpdated(msgspec.Struct):
    threadId: str
    threadName: str | None = None


class _LoadedPage(codex_types.Page[str]):
    pass


class _Started(msgspec.Struct):
    thread: codex_types.Thread


async def observe(
    url: str,
    token_file: str,
    picture: Picture,
    publish: Callable[[], None],
    hub: Hub | None = None,
    machines: Sequence[MachineOffer] = (),
) -> None:
    """Watch the Codex at ``url`` until the connection ends (returns) or cannot open.

    ``machines``: registered with this Codex first (``environment/add``): Codex keeps an
    environment for every connection, and forgets it when it restarts."""
    status_changed = publish
    if hub is not None:
        hub.watching(picture)

        def publish() -> None:
            status_changed()
            hub.picture_changed()  # the board takes what the picture forgot
    else:

        def publish() -> None:
            status_changed()
            picture.take_forgotten()  # no page: no rows to drop

    try:
        async with connect_codex(url, token_file=token_file) as connection:
            stream = connection.stream
            peer = Peer[str](jsonrpc_member=False)
            pending: dict[Any, trio.MemorySendChannel[Any]] = {}

            async def call(method: str, params: Any) -> Any:
                rid, data = peer.request(method, params, method)
                send, receive = trio.open_memory_channel[Any](1)
                pending[rid] = send
                try:
                    try:
                        await stream.send(data)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        # Codex is gone (killed, restarting): no answer will come. The watch
                        # ends when receive_all sees the connection close, cancelling this.
                        pending.pop(rid, None)
                        await trio.sleep_forever()
                    return await receive.receive()
                finally:
                    # Given up (a timeout, the page's cancel): a late answer finds no one.
                    pending.pop(rid, None)

            #: Threads being read, and those to read again once that read is done (their
            #: status changed meanwhile): one read at a time per thread, however many
            #: status changes come while Codex has not answered.
            reading: set[str] = set()
            again: set[str] = set()

            async def read_thread(thread_id: str) -> None:
                if thread_id in reading:
                    again.add(thread_id)
                    return
                reading.add(thread_id)
                try:
                    while True:
                        answer: Any = None
                        with trio.move_on_after(READ_SECONDS):
                            answer = await call(
                                "thread/read", codex_threads.ThreadReadParams(threadId=thread_id)
                            )
                        if isinstance(answer, bytes):
                            read = msgspec.json.decode(answer, type=codex_threads.ThreadReadResult)
                            picture.seen(read.thread)
                            publish()
                        if thread_id not in again:
                            return
                        again.discard(thread_id)
                finally:
                    reading.discard(thread_id)

            closed = trio.Event()

            async def receive_all(nursery: trio.Nursery) -> None:
                while True:
                    try:
                        data = await stream.receive()
                    except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                        closed.set()
                        # Whatever still waits on Codex (a thread's read, the first listing)
                        # waits for nothing now.
                        nursery.cancel_scope.cancel()
                        return
                    message = peer.receive(data)
                    if isinstance(message, (IncomingResponse, IncomingError)):
                        # None: an answer that came too late (its caller gave up).
                        waiting = pending.pop(message.id, None)
                        if waiting is not None:
                            answer = (
                                bytes(message.result)
                                if isinstance(message, IncomingResponse)
                                else message.error
                            )
                            waiting.send_nowait(answer)  # its channel holds one: never blocks
                    elif isinstance(message, IncomingRequest):
                        if hub is not None:
                            hub.request(message.id, message.method, bytes(message.params))
                            continue
                        # Never answered: Codex sends a request (a sub-agent's approval) to every
                        # connection and takes the first answer, which must be the editor's (or,
                        # after it reattaches, a later editor's). Unanswered here, it harms nothing.
                        log.debug("the watcher leaves Codex's %s to the editors", message.method)
                    elif isinstance(message, IncomingNotification):
                        _notified(message, picture, publish, nursery, read_thread)
                        if hub is not None:
                            hub.notification(message.method, bytes(message.params))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(receive_all, nursery)
                params = codex_types.InitializeParams(
                    clientInfo=codex_types.ClientInfo(
                        name="codex-acp-bridge-daemon", version=__version__
                    ),
                    capabilities=codex_types.InitializeCapabilities(experimentalApi=True),
                )
                await call("initialize", params)
                await stream.send(peer.notification("initialized"))
                for offer in machines:
                    if offer.registration is None:
                        continue
                    add = codex_types.EnvironmentAddParams(
                        environmentId=offer.name, execServerUrl=offer.registration.url
                    )
                    if offer.registration.token is not None:
                        add.authBearerToken = offer.registration.token
                    added = await call("environment/add", add)
                    if not isinstance(added, bytes):
                        log.warning(
                            "Codex refused machine %s: %s",
                            offer.name,
                            getattr(added, "message", added),
                        )
                cursor: str | None = None
                for _ in range(MAX_PAGES):
                    request: dict[str, Any] = {"limit": 100, "sourceKinds": SOURCE_KINDS}
                    if cursor:
                        request["cursor"] = cursor
                    answer = await call("thread/list", request)
                    if not isinstance(answer, bytes):
                        break
                    page = msgspec.json.decode(answer, type=codex_threads.ThreadListResult)
                    for stored in page.data:
                        picture.seen(stored)
                    cursor = page.nextCursor
                    if not cursor:
                        break
                # A thread never prompted is not stored, so not listed; one another client
                # works on (Codex's TUI, on Codex's daemon) is loaded all the same.
                loaded: list[str] = []
                cursor = None
                for _ in range(MAX_PAGES):
                    request = {"cursor": cursor} if cursor else {}
                    answer = await call("thread/loaded/list", request)
                    if not isinstance(answer, bytes):
                        break
                    loaded_page = msgspec.json.decode(answer, type=_LoadedPage)
                    loaded += loaded_page.data
                    cursor = loaded_page.nextCursor
                    if not cursor:
                        break
                for thread_id in loaded:
                    if thread_id not in picture:
                        await read_thread(thread_id)
                picture.back()
                publish()
                if hub is not None:

                    async def respond(request_id: Any, result: Any) -> None:
                        # Codex gone: the answer has nobody to go to (the watch is ending).
                        with contextlib.suppress(
                            trio.BrokenResourceError, trio.ClosedResourceError
                        ):
                            await stream.send(peer.response(request_id, result))

                    nursery.start_soon(hub.follow, call, respond)
                # The connection ends when Codex does.
                await closed.wait()
                nursery.cancel_scope.cancel()
    except (CodexUnavailable, msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("the daemon's watcher could not follow Codex: %s", exc)


def _notified(
    message: IncomingNotification,
    picture: Picture,
    publish: Callable[[], None],
    nursery: trio.Nursery,
    read_thread: Callable[[str], Any],
) -> None:
    try:
        if message.method == "thread/status/changed":
            note = msgspec.json.decode(message.params, type=_StatusChanged)
            if not picture.status(note.threadId, note.status):
                nursery.start_soon(read_thread, note.threadId)  # a sub-agent: no thread/started
                return
            if picture.untitled(note.threadId):
                # Its first message (the preview) names it once a turn has begun.
                nursery.start_soon(read_thread, note.threadId)
        elif message.method == "thread/started":
            picture.seen(msgspec.json.decode(message.params, type=_Started).thread)
        elif message.method == "thread/name/updated":
            named = msgspec.json.decode(message.params, type=_NameUpdated)
            picture.named(named.threadId, named.threadName)
        elif message.method in ("thread/deleted", "thread/archived"):
            picture.gone(
                msgspec.json.decode(message.params, type=codex_threads.ThreadGone).threadId
            )
        else:
            return
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("Codex %s not understood by the watcher: %s", message.method, exc)
        return
    publish()
