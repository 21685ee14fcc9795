"""The trio shell: move bytes between the ACP client, the engine and Codex.

Tasks live in one nursery owned by :func:`run_bridge`:

- a reader per side, which feeds each complete message to the engine;
- a writer per side, which drains that side's :class:`Outbox` in order;
- the Codex side's supervisor, which opens the connection to Codex, runs its
  reader and writer, and when Codex is lost brings it back (:class:`Restart`),
  telling the engine (``codex_lost``, ``codex_restarted``, ``codex_gave_up``).

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
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

import trio

from ..engine import Effect, Engine, ToClient, ToCodex
from ..jsonrpc import ErrorCode
from .codex_transport import CodexConnection, CodexUnavailable
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


@dataclass(frozen=True)
class Restart:
    """How the shell brings Codex back after it was lost (it had been ready once).

    The first attempt comes after ``first`` seconds, each later one waits twice as
    long, at most ``longest``; a connection that became ready starts the series
    over. ``give_up_after`` losses within ``window`` seconds are a crash loop: the
    shell stops trying, says why on stderr, and the engine fails what comes with
    that reason, while the bridge stays up for the client.
    """

    first: float = 0.25
    longest: float = 30.0
    give_up_after: int = 5
    window: float = 60.0


class Backoff:
    """The losses of one supervised Codex, as :class:`Restart` counts them (no clock of
    its own: each loss comes with the time it happened)."""

    def __init__(self, restart: Restart) -> None:
        self.restart = restart
        self._losses: deque[float] = deque()
        self._delay = restart.first

    def lost(self, now: float, reason: str, *, was_ready: bool) -> tuple[float, str | None]:
        """Record a loss: how long to wait before the next attempt, and, for a crash
        loop, the sentence that says the attempts are over (``None`` otherwise)."""
        restart, losses = self.restart, self._losses
        losses.append(now)
        while losses and losses[0] < now - restart.window:
            losses.popleft()
        if len(losses) >= restart.give_up_after:
            return 0.0, (
                f"Codex was lost {len(losses)} times within {restart.window:g} s; "
                f"not restarting it (last: {reason})"
            )
        if was_ready:
            self._delay = restart.first
        delay = self._delay
        self._delay = min(delay * 2, restart.longest)
        return delay, None


Connect = Callable[[], AbstractAsyncContextManager[CodexConnection]]


async def run_bridge(
    client: MessageStream,
    connect: Connect,
    engine: Engine,
    *,
    restart: Restart | None = None,
    tap: Tap | None = None,
) -> None:
    """Serve one ACP client against Codex until the client leaves.

    ``connect`` opens a connection to Codex (spawning it, or attaching to it).
    Raises :class:`CodexUnavailable` when Codex is lost before it ever became
    ready (nothing could work), after the client has had its answers. Once it
    has been ready, a lost Codex is brought back as ``restart`` says (never,
    without one). ``tap`` sees every message and event (used for recordings).
    """
    to_client = Outbox(client)
    to_codex: Outbox | None = None  # the current connection's, while there is one
    fatal: str | None = None
    settled = trio.Event()  # Codex is ready, or lost for good

    def dispatch(effects: Iterable[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, ToClient):
                if tap:
                    tap.message("to_client", effect.data)
                to_client.put(effect.data)
            elif isinstance(effect, ToCodex):
                if to_codex is None:
                    log.debug("no Codex connection; dropping %s", effect.data[:80])
                    continue
                if tap:
                    tap.message("to_codex", effect.data)
                to_codex.put(effect.data)

    async def read_codex(codex: MessageStream, exit_reason: Callable[[], Awaitable[str]]) -> str:
        """Feed Codex's messages to the engine until the connection ends; why it ended."""
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
            return f"Codex sent a message the bridge cannot accept ({exc})"
        except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
            return await exit_reason()

    def lost(reason: str, *, retrying: bool) -> None:
        if tap:
            tap.event("codex_lost", reason, retrying=retrying)
        dispatch(engine.codex_lost(reason, retrying=retrying))

    async def codex_side() -> None:
        nonlocal to_codex, fatal
        backoff = Backoff(restart) if restart else None
        ever_ready = False
        while True:
            ready = False
            try:
                async with connect() as connection, trio.open_nursery() as inner:
                    to_codex = Outbox(connection.stream)
                    inner.start_soon(to_codex.run)
                    if not ever_ready:
                        dispatch(engine.start())
                    else:
                        log.info("Codex restarted; every session resumes once it is ready")
                        if tap:
                            tap.event("codex_restarted")
                        dispatch(engine.codex_restarted())
                    reason = await read_codex(connection.stream, connection.exit_reason)
                    ready = engine.codex_ready
                    to_codex = None
                    inner.cancel_scope.cancel()
            except CodexUnavailable as exc:
                reason = str(exc)
            to_codex = None
            ever_ready = ever_ready or ready
            if not ever_ready or backoff is None:
                # Nothing ever worked (the first start failed), or nobody brings it back.
                lost(reason, retrying=False)
                settled.set()
                if ever_ready:
                    log.error("%s", reason)
                    return
                fatal = reason
                with trio.move_on_after(_FLUSH_SECONDS):
                    await to_client.wait_empty()
                raise _Fatal
            delay, why = backoff.lost(trio.current_time(), reason, was_ready=ready)
            if why is not None:
                log.error("%s", why)
                lost(reason, retrying=True)  # what waits, waits for the verdict below
                if tap:
                    tap.event("codex_gave_up", why)
                dispatch(engine.codex_gave_up(why))
                settled.set()
                return
            log.warning("%s; restarting in %.2g s", reason, delay)
            lost(reason, retrying=True)
            await trio.sleep(delay)

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
            if to_codex is not None:
                await to_codex.wait_below_high_water()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(to_client.run)
            nursery.start_soon(codex_side)
            await read_client()
            # Answers to the client's last messages still go out (a client may
            # close its side of the pipe and keep reading), including those that
            # waited for Codex to start.
            with trio.move_on_after(_STARTUP_SECONDS):
                await settled.wait()
            with trio.move_on_after(_FLUSH_SECONDS):
                await to_client.wait_empty()
                if to_codex is not None:
                    await (
                        to_codex.wait_empty()
                    )  # e.g. the answers to approvals nobody will give now
            nursery.cancel_scope.cancel()
    except* _Fatal:
        pass
    if fatal is not None:
        raise CodexUnavailable(fatal)


class _Fatal(Exception):
    """Codex never became ready: the whole bridge stops (after the client's answers)."""
