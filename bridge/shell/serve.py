"""The trio shell: move bytes between the ACP client, the engine and Codex.

Three kinds of task live in one nursery owned by :func:`run_bridge`:

- a reader per side, which feeds each complete message to the engine;
- a writer per side, which drains that side's :class:`Outbox` in order.

The engine is called from one task at a time (trio is single-threaded and the
engine never awaits), and each call's effects are queued before the next call,
so the order the engine decided is the order on the wire.

Back-pressure: a reader does not read its next message while the *other*
side's outbox is above its high-water mark. A slow ACP client therefore slows
the reading of Codex's output (and so Codex itself, through its pipe or
socket) instead of growing memory without bound.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

import trio

from ..engine import Effect, Engine, ToClient, ToCodex
from ..jsonrpc import ErrorCode
from .codex_transport import CodexUnavailable
from .streams import MessageStream, MessageTooLarge

log = logging.getLogger(__name__)

#: Most bytes an outbox writes in one call.
_BATCH_BYTES = 1024 * 1024
#: How long answers may take to drain once the client has stopped sending.
_FLUSH_SECONDS = 2.0
#: How long a client that has left still waits for Codex to finish starting.
_STARTUP_SECONDS = 30.0


class Tap(Protocol):
    """Sees everything the engine is fed and sends, in the engine's order (recordings)."""

    def message(self, direction: str, data: bytes) -> None:
        """``direction``: ``from_client``, ``to_client``, ``from_codex`` or ``to_codex``."""

    def event(self, name: str, reason: str = "", *, retrying: bool = False) -> None:
        """Something the shell observed and told the engine (``codex_lost``, ...)."""


class Outbox:
    """Messages for one peer, in order, written by a single task (:meth:`run`)."""

    def __init__(self, stream: MessageStream, *, high_water: int = 256) -> None:
        self._stream = stream
        self._queue: deque[bytes] = deque()
        self._high_water = high_water
        self._has_items = trio.lowlevel.ParkingLot()
        self._drained = trio.lowlevel.ParkingLot()
        self.broken: BaseException | None = None

    def put(self, data: bytes) -> None:
        self._queue.append(data)
        if len(self._queue) == 1:  # the writer only ever waits on an empty queue
            self._has_items.unpark_all()

    async def wait_below_high_water(self) -> None:
        while len(self._queue) > self._high_water and self.broken is None:
            await self._drained.park()

    async def wait_empty(self) -> None:
        while self._queue and self.broken is None:
            await self._drained.park()

    async def run(self) -> None:
        try:
            while True:
                while not self._queue:
                    await self._has_items.park()
                # Write everything queued so far in one go (bounded), and keep it
                # queued until written, so wait_empty() means "on the wire".
                batch: list[bytes] = []
                size = 0
                for data in self._queue:
                    batch.append(data)
                    size += len(data)
                    if size >= _BATCH_BYTES:
                        break
                count = len(batch)
                await self._stream.send_batch(batch)
                for _ in range(count):
                    self._queue.popleft()
                self._drained.unpark_all()
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            # The peer went away; the reader of that side reports it.
            self.broken = exc
            self._queue.clear()
            self._drained.unpark_all()


async def run_bridge(
    client: MessageStream,
    codex: MessageStream,
    engine: Engine,
    *,
    codex_exit_reason: Callable[[], Awaitable[str]] | None = None,
    tap: Tap | None = None,
) -> None:
    """Serve one ACP client against one Codex until the client leaves.

    Raises :class:`CodexUnavailable` when Codex is lost before it ever became
    ready (nothing could work), after the client has had its answers.
    ``tap`` sees every message and event (used for recordings).
    """
    to_client = Outbox(client)
    to_codex = Outbox(codex)
    fatal: str | None = None
    settled = trio.Event()  # Codex is ready, or lost

    def dispatch(effects: Iterable[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, ToClient):
                if tap:
                    tap.message("to_client", effect.data)
                to_client.put(effect.data)
            elif isinstance(effect, ToCodex):
                if tap:
                    tap.message("to_codex", effect.data)
                to_codex.put(effect.data)

    async def read_codex() -> None:
        nonlocal fatal
        try:
            while True:
                data = await codex.receive()
                if tap:
                    tap.message("from_codex", data)
                dispatch(engine.receive_codex(data))
                if not engine.starting:
                    settled.set()
                await to_client.wait_below_high_water()
        except MessageTooLarge as exc:
            reason = f"Codex sent a message the bridge cannot accept ({exc})"
        except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
            reason = (
                await codex_exit_reason() if codex_exit_reason else "Codex closed the connection"
            )
        was_ready = engine.codex_ready
        if tap:
            tap.event("codex_lost", reason)
        dispatch(engine.codex_lost(reason))
        settled.set()
        if not was_ready:
            fatal = reason
            with trio.move_on_after(_FLUSH_SECONDS):
                await to_client.wait_empty()
            nursery.cancel_scope.cancel()
        else:
            log.error("%s", reason)

    async def read_client() -> None:
        while True:
            try:
                data = await client.receive()
            except MessageTooLarge as exc:
                dispatch([ToClient(engine.client.error(None, ErrorCode.INVALID_REQUEST, str(exc)))])
                continue
            except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                log.info("client closed the connection")
                if tap:
                    tap.event("client_lost")
                dispatch(engine.client_lost())
                return
            if tap:
                tap.message("from_client", data)
            dispatch(engine.receive_client(data))
            await to_codex.wait_below_high_water()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(to_client.run)
        nursery.start_soon(to_codex.run)
        dispatch(engine.start())
        nursery.start_soon(read_codex)
        await read_client()
        # Answers to the client's last messages still go out (a client may
        # close its side of the pipe and keep reading), including those that
        # waited for Codex to start.
        with trio.move_on_after(_STARTUP_SECONDS):
            await settled.wait()
        with trio.move_on_after(_FLUSH_SECONDS):
            await to_client.wait_empty()
            await to_codex.wait_empty()  # e.g. the answers to approvals nobody will give now
        nursery.cancel_scope.cancel()
    if fatal is not None:
        raise CodexUnavailable(fatal)
