"""The trio shell: move bytes between the ACP client, the engine and Codex.

Tasks live in one nursery owned by :func:`run_bridge`:

- a reader per side, which feeds each complete message to the engine;
- a writer per side (:class:`Writer`), which drains that side's
  :class:`~bridge.engine.core.outbox.Outbox` in order;
- the Codex side's supervisor, which opens the connection to Codex, runs its
  reader and writer, and when Codex is lost brings it back (:class:`Restart`),
  telling the engine (``codex_lost``, ``codex_restarted``, ``codex_gave_up``).

The engine is called from one task at a time (trio is single-threaded and the
engine never awaits), and each call's effects are queued before the next call,
so the order the engine decided is the order on the wire.

A slow client: when a write to the client has waited longer than
:data:`BEHIND_AFTER`, its outbox is marked behind and merges consecutive deltas
of one stream into one message, so the bridge keeps reading Codex (whose own
buffers would otherwise grow) and the client catches up with a few messages
instead of one per word. Back-pressure comes after that: a reader does not
read its next message while the *other* side's outbox holds more than its
ceiling in bytes, so a client that never reads slows Codex itself (through its
pipe or socket) instead of growing memory without bound.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from ..engine import Effect, Engine, MachineCall, ToClient, ToCodex
from ..engine.core.outbox import CLIENT_CEILING, CODEX_CEILING, Outbox
from ..jsonrpc import ErrorCode
from .codex_transport import CodexConnection, CodexUnavailable
from .effects import Tap, carry_out, machine_answered
from .restart import Backoff, Restart
from .streams import MessageStream, MessageTooLarge

if TYPE_CHECKING:
    # A session with machines only: websockets (and asyncio under it) cost a start without.
    from .machine_files import MachineCalls
    from .machine_link import MachineLinks

log = logging.getLogger(__name__)

#: Most bytes a writer writes in one call: about a pipe's buffer, so a write that waits
#: long is one the reader has not made room for (not merely a big one).
_BATCH_BYTES = 64 * 1024
#: How long one write to a peer may wait before that peer counts as behind.
BEHIND_AFTER = 0.1
#: How long answers may take to drain once the client has stopped sending.
_FLUSH_SECONDS = 2.0
#: How long a client that has left still waits for Codex to finish starting.
_STARTUP_SECONDS = 30.0


class Writer:
    """Writes one peer's :class:`Outbox` to its stream, in order, from a single task
    (:meth:`run`), and tells the outbox when that peer is behind. A message with nothing
    ahead of it is written at once by :meth:`put` where the stream can (a pipe with room:
    ``MessageStream.send_nowait``); the task writes what the pipe did not take.

    The peer is *behind* when one write to it has waited longer than
    :data:`BEHIND_AFTER`: a reader that keeps up never leaves a write waiting that
    long, one that has paused does. A watcher task (:meth:`watch`) checks only while
    a write is under way, so an idle bridge never wakes for it.
    """

    def __init__(self, stream: MessageStream, outbox: Outbox) -> None:
        self._stream = stream
        self.outbox = outbox
        self._has_items = trio.lowlevel.ParkingLot()
        self._drained = trio.lowlevel.ParkingLot()
        self._writing = trio.lowlevel.ParkingLot()
        #: Writes started so far (the last one is under way while ``_in_flight``).
        self._writes = 0
        #: Bytes of the write under way (taken from the outbox, not yet on the wire).
        self._in_flight = 0
        self.broken: BaseException | None = None

    def put(self, effect: ToClient | ToCodex) -> None:
        if not self.outbox and not self._in_flight and self.broken is None:
            # Nothing ahead of it: written at once where the stream can (a pipe with room),
            # with no turn of the writer's task.
            stream = self._stream
            if stream.send_nowait(effect.data):
                if stream.unsent:  # the pipe took part: the writer's task writes the rest
                    self._write_started(stream.unsent)
                    self._has_items.unpark_all()
                return
        self.outbox.put(effect)
        if self._has_items:  # only a writer waiting on an empty outbox is parked there
            self._has_items.unpark_all()

    @property
    def idle(self) -> bool:
        return not self.outbox and not self._in_flight

    @property
    def full(self) -> bool:
        """More than the outbox's ceiling is not on the wire yet."""
        return self.outbox.size + self._in_flight >= self.outbox.ceiling

    async def wait_below_ceiling(self) -> None:
        while self.full and self.broken is None:
            await self._drained.park()

    async def wait_empty(self) -> None:
        """Until everything put so far is on the wire (or the peer is gone)."""
        while not self.idle and self.broken is None:
            await self._drained.park()

    async def run(self) -> None:
        outbox = self.outbox
        try:
            while True:
                while not outbox and not self._in_flight:
                    await self._has_items.park()
                if self._in_flight:  # the rest of a message written at once (see put)
                    await self._stream.flush()
                else:
                    size = outbox.size
                    batch = outbox.take(_BATCH_BYTES)
                    self._write_started(size - outbox.size)
                    await self._stream.send_batch(batch)
                self._in_flight = 0
                outbox.behind = False
                self._drained.unpark_all()
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            # The peer went away; the reader of that side reports it.
            self.broken = exc
            self._in_flight = 0
            outbox.clear()
            self._drained.unpark_all()

    def _write_started(self, size: int) -> None:
        """``size`` bytes are being written: the watcher times the write."""
        self._in_flight = size
        self._writes += 1
        self._writing.unpark_all()

    async def watch(self) -> None:
        """Mark the outbox behind while a write has waited longer than :data:`BEHIND_AFTER`."""
        while True:
            if not self._in_flight:
                await self._writing.park()
                continue
            write = self._writes
            await trio.sleep(BEHIND_AFTER)
            # The bridge itself may have kept the writer from running (a long burst of
            # Codex messages): let it run once before blaming the peer.
            for _ in range(2):
                await trio.lowlevel.cancel_shielded_checkpoint()
            if self._in_flight and self._writes == write:
                self.outbox.behind = True
                while self._in_flight and self._writes == write:
                    await self._drained.park()


Connect = Callable[[], AbstractAsyncContextManager[CodexConnection]]

_SHUTTING_DOWN = b"serverShuttingDown"


class _Refusal(msgspec.Struct):
    data: Any = None


class _RefusedResponse(msgspec.Struct):
    error: _Refusal


def _shutting_down(data: bytes) -> bool:
    """Whether Codex answered -32600 ``{"reason": "serverShuttingDown"}``: its daemon
    drains its connections ("retry after reconnecting")."""
    try:
        refused = msgspec.json.decode(data, type=_RefusedResponse)
    except msgspec.DecodeError:  # ValidationError too: not an error response
        return False
    return isinstance(refused.error.data, dict) and (
        refused.error.data.get("reason") == "serverShuttingDown"
    )


async def run_bridge(
    client: MessageStream,
    connect: Connect,
    engine: Engine,
    *,
    restart: Restart | None = None,
    tap: Tap | None = None,
    client_ceiling: int = CLIENT_CEILING,
    handshake_sent: bool = False,
    machines: MachineLinks | None = None,
) -> None:
    """Serve one ACP client against Codex until the client leaves.

    ``connect`` opens a connection to Codex (spawning it, or attaching to it).
    When Codex is lost before it ever became ready (nothing can work), every
    request that needs Codex is answered with an error saying why, and
    :class:`CodexUnavailable` is raised once the client has left. Once it
    has been ready, a lost Codex is brought back as ``restart`` says (never,
    without one). ``tap`` sees every message and event (used for recordings).
    ``client_ceiling``: bytes waiting for the client above which Codex is no longer
    read, when it can wait (see :attr:`CodexConnection.waits`). ``handshake_sent``: the
    engine's handshake is already written to the first connection's Codex (started and
    greeted before trio ran: :mod:`bridge.shell.early`). ``machines``: the links to the
    machines the engine offers, run here; each change of theirs is told to the engine.
    """
    to_client = Writer(client, Outbox(ceiling=client_ceiling))
    to_codex: Writer | None = None  # the current connection's, while there is one
    fatal: str | None = None
    settled = trio.Event()  # Codex is ready, or lost for good
    # Past a handshake sent before the shell ran, the engine sends a client's requests
    # straight to Codex: the client is read once there is a connection to send them on.
    connected = trio.Event()

    calls: MachineCalls | None = None
    if machines is not None:
        from .machine_files import MachineCalls

        calls = MachineCalls(
            [link.spec for link in machines.links.values()],
            machines.ssh,
            ready=machines.ready_spec,
        )

    def call_machine(call: MachineCall) -> None:
        assert calls is not None
        calls.call(call, lambda answer: dispatch(machine_answered(engine, tap, call, answer)))

    def dispatch(effects: Iterable[Effect]) -> None:
        carry_out(
            effects,
            engine,
            tap,
            to_client.put,
            to_codex.put if to_codex else None,
            machines.want if machines is not None else None,
            machines.store.set if machines is not None else None,
            call_machine if calls is not None else None,
            machines.release if machines is not None else None,
        )

    def machine_changed(name: str, state: str, reason: str) -> None:
        if tap:
            tap.event("machine_changed", reason, machine=name, state=state)
        dispatch(engine.machine_changed(name, state, reason))

    if machines is not None:
        machines.on_change = machine_changed

    async def read_codex(connection: CodexConnection) -> str:
        """Feed Codex's messages to the engine until the connection ends; why it ended."""
        codex = connection.stream
        try:
            while True:
                data = await codex.receive()
                if _SHUTTING_DOWN in data and _shutting_down(data):
                    # Codex's daemon drains before it restarts or updates itself: what it
                    # refuses now is retried on the next connection, as after any loss.
                    return "Codex's daemon is restarting (serverShuttingDown)"
                if tap:
                    tap.message("from_codex", data)
                dispatch(engine.receive_codex(data))
                if not settled.is_set() and not engine.starting:
                    settled.set()
                if connection.waits and to_client.full:
                    # Past the ceiling, Codex waits for the client. A Codex that would
                    # drop the connection instead is read on: the client's backlog,
                    # merged as far as it merges, grows rather than the session dying.
                    # (Checked before awaiting: this runs for every message.)
                    await to_client.wait_below_ceiling()
        except MessageTooLarge as exc:
            return f"Codex sent a message the bridge cannot accept ({exc})"
        except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
            return await connection.exit_reason()

    async def prepare() -> None:
        # After a turn of the scheduler the handshake is on its way to Codex (written into a
        # pipe as it was dispatched; by the writer's task over a WebSocket): the engine's
        # preparation then costs the client nothing, done while Codex starts.
        await trio.lowlevel.checkpoint()
        engine.prepare()

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
                    to_codex = Writer(connection.stream, Outbox(ceiling=CODEX_CEILING))
                    inner.start_soon(to_codex.run)
                    connected.set()
                    if not ever_ready:
                        if not handshake_sent:
                            dispatch(engine.start())
                        inner.start_soon(prepare)
                    else:
                        log.info("Codex restarted; every session resumes once it is ready")
                        if tap:
                            tap.event("codex_restarted")
                        dispatch(engine.codex_restarted())
                    reason = await read_codex(connection)
                    ready = engine.codex_ready
                    to_codex = None
                    inner.cancel_scope.cancel()
            except CodexUnavailable as exc:
                reason = str(exc)
            to_codex = None
            connected.set()
            ever_ready = ever_ready or ready
            if not ever_ready or backoff is None:
                # Nothing ever worked (the first start failed), or nobody brings it back.
                # The engine answers what waited, and from now on every request that needs
                # Codex, with the reason; the bridge stays for the client until it leaves, so
                # an editor shows why instead of a connection that dropped.
                lost(reason, retrying=False)
                settled.set()
                if ever_ready:
                    log.error("%s", reason)
                else:
                    log.warning("Codex could not start: %s", reason)
                    fatal = reason
                return
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
        if handshake_sent:
            await connected.wait()
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
                await to_codex.wait_below_ceiling()

    async with trio.open_nursery() as nursery:
        if machines is not None:
            await nursery.start(machines.run)
        if calls is not None:
            await nursery.start(calls.run)
        nursery.start_soon(to_client.run)
        nursery.start_soon(to_client.watch)
        nursery.start_soon(codex_side)
        await read_client()
        # Answers to the client's last messages still go out (a client may
        # close its side of the pipe and keep reading), including those that
        # wait for Codex to start. If none waits (initialize is answered without
        # Codex), Codex's start is waited for only briefly: long enough to say
        # why it failed, if it does, but a Codex that hangs does not hold us up.
        waiting = engine.client_waiting
        with trio.move_on_after(_STARTUP_SECONDS if waiting else _FLUSH_SECONDS):
            await settled.wait()
        with trio.move_on_after(_FLUSH_SECONDS):
            await to_client.wait_empty()
            if to_codex is not None:
                await to_codex.wait_empty()  # e.g. the answers to approvals nobody will give now
        nursery.cancel_scope.cancel()
    if fatal is not None:
        raise CodexUnavailable(fatal)
