"""The trio shell over in-memory streams: framing, size caps, ordering, back-pressure."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
import trio
import trio.testing

from bridge.acp import types as acp_types
from bridge.engine import Engine, ToClient, ToCodex
from bridge.engine.core.outbox import Outbox, update_effect
from bridge.recording import parse_recording, replay
from bridge.recording.format import EventRecord
from bridge.recording.recorder import Recorder
from bridge.shell.codex_transport import CodexConnection, strip_ansi
from bridge.shell.restart import Backoff, Restart
from bridge.shell.run_bridge import BEHIND_AFTER, Connect, Writer, run_bridge
from bridge.shell.streams import LineStream, MessageTooLarge, WaitingSends

if TYPE_CHECKING:
    from websockets.server import ServerProtocol

MESSAGES = [b'{"a":1}', b'{"b":"two words"}', b"{}", b'{"c":[1,2,3]}']


class _ChunkedReceive(trio.abc.ReceiveStream):
    """Hands out fixed data in chunks of the given size."""

    def __init__(self, data: bytes, size: int) -> None:
        self.data, self.size = data, size

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        chunk, self.data = self.data[: self.size], self.data[self.size :]
        return chunk

    async def aclose(self) -> None:
        pass


async def _read_all(stream: LineStream) -> list[bytes | str]:
    out: list[bytes | str] = []
    while True:
        try:
            out.append(await stream.receive())
        except trio.EndOfChannel:
            return out
        except MessageTooLarge:
            out.append("too large")


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1000])
async def test_lines_are_reassembled_whatever_the_chunking(chunk: int) -> None:
    wire = (
        b"\n".join(MESSAGES) + b"\n\n  \r\n" + b'{"last":true}'
    )  # blank lines skipped, no final newline
    stream = LineStream(_ChunkedReceive(wire, chunk), trio.testing.MemorySendStream())
    assert await _read_all(stream) == [*MESSAGES, b'{"last":true}']


@pytest.mark.parametrize("chunk", [1, 5, 64])
async def test_an_oversized_line_is_dropped_whole_and_reading_goes_on(chunk: int) -> None:
    wire = b'{"ok":1}\n' + b"x" * 100 + b'\n{"ok":2}\n'
    stream = LineStream(
        _ChunkedReceive(wire, chunk), trio.testing.MemorySendStream(), max_message=50
    )
    assert await _read_all(stream) == [b'{"ok":1}', "too large", b'{"ok":2}']


async def test_writer_keeps_order_and_applies_back_pressure_in_bytes() -> None:
    sent: list[bytes] = []
    gate = trio.Event()

    class SlowStream(WaitingSends):
        async def send_batch(self, messages: list[bytes]) -> None:
            await gate.wait()
            sent.extend(messages)

    writer = Writer(SlowStream(), Outbox(ceiling=3))  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        for n in range(10):
            writer.put(ToCodex(str(n).encode()))
        waited = False

        async def producer() -> None:
            nonlocal waited
            await writer.wait_below_ceiling()
            waited = True

        nursery.start_soon(producer)
        await trio.testing.wait_all_tasks_blocked()
        assert not waited, "an outbox above its ceiling holds its producer back"
        gate.set()
        await writer.wait_empty()
        await trio.testing.wait_all_tasks_blocked()
        assert waited
        nursery.cancel_scope.cancel()
    assert sent == [str(n).encode() for n in range(10)]


async def test_a_writer_that_stops_releases_what_waits_on_it() -> None:
    """The Codex side cancels its connection's writer when that connection ends: a reader
    held back by the writer's ceiling, or a wait for it to drain, must not stay parked on a
    writer nobody runs any more (the client would never be read again)."""

    class StuckStream(WaitingSends):
        async def send_batch(self, messages: list[bytes]) -> None:
            await trio.sleep_forever()

    writer = Writer(StuckStream(), Outbox(ceiling=3))  # type: ignore[arg-type]
    released: list[str] = []

    async def wait(name: str, until: Callable[[], Awaitable[None]]) -> None:
        await until()
        released.append(name)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as writing:
                nursery.start_soon(wait, "below ceiling", writer.wait_below_ceiling)
                nursery.start_soon(wait, "empty", writer.wait_empty)
                for n in range(10):
                    writer.put(ToCodex(str(n).encode()))
                async with trio.open_nursery() as inner:
                    inner.start_soon(writer.run)
                    await trio.testing.wait_all_tasks_blocked()
                    assert released == [], "the writer is stuck: both wait"
                    writing.cancel()
    assert sorted(released) == ["below ceiling", "empty"]


def _chunk(session_id: str, text: str) -> ToClient:
    return update_effect(
        session_id,
        acp_types.AgentMessageChunk(content=acp_types.TextContent(text=text), messageId="m1"),
    )


async def test_a_write_that_waits_marks_the_client_behind_and_deltas_merge(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The shell's half of coalescing: a stalled write makes the outbox merge, and a
    completed one ends it (the pure half is tests/test_outbox.py)."""
    sent: list[list[bytes]] = []
    gate = trio.Event()

    class PausedClient(WaitingSends):
        async def send_batch(self, messages: list[bytes]) -> None:
            await gate.wait()
            sent.append(list(messages))

    writer = Writer(PausedClient(), Outbox())  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        nursery.start_soon(writer.watch)
        writer.put(_chunk("s", "a"))
        await trio.sleep(BEHIND_AFTER / 2)
        assert not writer.outbox.behind, "a write waiting briefly is no slow client"
        await trio.sleep(BEHIND_AFTER)
        assert writer.outbox.behind
        for word in ("b", "c", "d"):
            writer.put(_chunk("s", word))
        assert len(writer.outbox) == 1
        gate.set()
        await writer.wait_empty()
        assert not writer.outbox.behind
        writer.put(_chunk("s", "e"))
        writer.put(_chunk("s", "f"))
        await writer.wait_empty()
        nursery.cancel_scope.cancel()
    texts = [
        [msgspec.json.decode(m)["params"]["update"]["content"]["text"] for m in batch]
        for batch in sent
    ]
    assert texts == [["a"], ["bcd"], ["e", "f"]]


@asynccontextmanager
async def _pipe_writer() -> AsyncIterator[tuple[Writer, trio.lowlevel.FdStream, int]]:
    """A Writer into a real pipe, the pipe's read end, and a raw fd to fill it with."""
    read_fd, write_fd = os.pipe()
    sink = trio.lowlevel.FdStream(write_fd)
    source = trio.lowlevel.FdStream(read_fd)
    writer = Writer(LineStream(source, sink), Outbox())
    try:
        yield writer, source, write_fd
    finally:
        await sink.aclose()
        await source.aclose()


def _fill(fd: int) -> int:
    """Write into a non-blocking pipe until it is full; the bytes written."""
    written = 0
    chunk = b"f" * 4096
    with contextlib.suppress(BlockingIOError):
        while True:
            written += os.write(fd, chunk)
    return written


async def _read_exactly(source: trio.lowlevel.FdStream, size: int) -> bytes:
    data = b""
    while len(data) < size:
        data += await source.receive_some(size - len(data))
    return data


async def test_a_message_with_nothing_ahead_is_written_into_a_pipe_at_once() -> None:
    """No turn of the writer's task: its task is not even running."""
    async with _pipe_writer() as (writer, source, _fd):
        writer.put(ToCodex(b'{"a":1}'))
        writer.put(ToCodex(b'{"b":2}'))
        assert writer.idle, "both are on the wire already"
        with trio.fail_after(5):
            assert await _read_exactly(source, 16) == b'{"a":1}\n{"b":2}\n'


async def test_what_a_full_pipe_did_not_take_goes_before_what_follows() -> None:
    async with _pipe_writer() as (writer, source, fd):
        filled = _fill(fd)
        # Room for two pages of a 20,000-byte message (a pipe frees whole pages).
        with trio.fail_after(5):
            assert await _read_exactly(source, 8192) == b"f" * 8192
        big = b'"' + b"x" * 19998 + b'"'
        writer.put(ToCodex(big))
        assert not writer.idle, "the rest of it is still to be written"
        for n in range(3):
            writer.put(ToCodex(str(n).encode()))
        assert len(writer.outbox) == 3, "what follows waits for the rest"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            with trio.fail_after(5):
                await _read_exactly(source, filled - 8192)
                got = await _read_exactly(source, len(big) + 1 + 6)
                await writer.wait_empty()
            nursery.cancel_scope.cancel()
        assert got == big + b"\n0\n1\n2\n"
        assert writer.idle


async def test_a_full_pipe_takes_nothing_at_once_and_the_writer_sends_it() -> None:
    async with _pipe_writer() as (writer, source, fd):
        filled = _fill(fd)
        writer.put(ToCodex(b'{"late":true}'))
        assert len(writer.outbox) == 1, "queued, not half-written"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            with trio.fail_after(5):
                await _read_exactly(source, filled)
                assert await _read_exactly(source, 14) == b'{"late":true}\n'
                await writer.wait_empty()
            nursery.cancel_scope.cancel()


async def test_an_idle_writer_does_not_wake_its_watcher() -> None:
    writer = Writer(trio.testing.MemorySendStream(), Outbox())  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.watch)
        await trio.testing.wait_all_tasks_blocked()
        stats = writer._writing.statistics()
        assert stats.tasks_waiting == 1, "the watcher parks until a write starts"
        nursery.cancel_scope.cancel()


async def test_bridge_over_memory_streams_answers_and_flushes_before_exit() -> None:
    """The whole shell with a fake Codex peer (unit level: the real one is in the e2e tests)."""
    client_side, bridge_client_end = trio.testing.memory_stream_pair()
    codex_side, bridge_codex_end = trio.testing.memory_stream_pair()
    client = LineStream(client_side, client_side)
    codex = LineStream(codex_side, codex_side)

    async def fake_codex() -> None:
        init = msgspec.json.decode(await codex.receive())
        assert init["method"] == "initialize"
        await codex.send(msgspec.json.encode({"id": init["id"], "result": {}}))
        assert msgspec.json.decode(await codex.receive()) == {"method": "initialized"}

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_bridge_to_a_fake_codex(bridge_client_end, bridge_codex_end))
            nursery.start_soon(fake_codex)
            await client.send(
                b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}'
            )
            await client.send(b"not json")
            await client_side.send_stream.aclose()  # the client is done talking
            first = msgspec.json.decode(await client.receive())
            second = msgspec.json.decode(await client.receive())
            assert first["id"] == 7 and first["result"]["protocolVersion"] == 1
            assert second["error"]["code"] == -32700


async def _said(reason: str) -> str:
    return reason


def _bridge_to_a_fake_codex(
    client_end: trio.testing.MemoryStapledStream[Any],
    codex_end: trio.testing.MemoryStapledStream[Any],
    **options: Any,
) -> Callable[[], Awaitable[None]]:
    """``run_bridge`` between a client's and a fake Codex's in-memory streams (one Codex
    connection, lost as "fake Codex closed"), for a nursery to start."""
    codex_stream = LineStream(codex_end, codex_end)

    @asynccontextmanager
    async def connect() -> AsyncIterator[CodexConnection]:
        yield CodexConnection(codex_stream, lambda: _said("fake Codex closed"))

    return functools.partial(
        run_bridge, LineStream(client_end, client_end), connect, Engine(), **options
    )


def test_backoff_doubles_to_its_ceiling_starts_over_after_a_ready_codex_and_sees_a_crash_loop() -> (
    None
):
    backoff = Backoff(Restart(first=0.25, longest=1.0, give_up_after=5, window=60))
    assert [backoff.lost(t, "x", was_ready=False)[0] for t in (0, 1, 2, 3)] == [0.25, 0.5, 1.0, 1.0]
    _delay, why = backoff.lost(4, "exited with status 1", was_ready=True)
    assert (
        why == "Codex was lost 5 times within 60 s; not restarting it (last: exited with status 1)"
    )
    later = Backoff(Restart(first=0.25, longest=1.0, give_up_after=5, window=60))
    for t in (0, 100, 200, 300):  # losses far apart: never a crash loop
        assert later.lost(t, "x", was_ready=False)[1] is None
    assert later.lost(400, "x", was_ready=True) == (0.25, None)  # a ready Codex starts over


@pytest.mark.parametrize(
    ("line", "text"),
    [
        # Codex's own log line: dim time, green level, dim target.
        (
            "\x1b[2m2026-11-30T13:48:19.129882Z\x1b[0m \x1b[32m INFO\x1b[0m "
            "\x1b[2mcodex_app_server\x1b[0m\x1b[2m:\x1b[0m listening",
            "2026-11-30T13:48:19.129882Z  INFO codex_app_server: listening",
        ),
        ("\x1b[1;31mERROR\x1b[0m x", "ERROR x"),  # parameters
        ("\x1b[38;2;255;0;0mred\x1b[m", "red"),  # truecolour, bare reset
        ("\x1b[?25lhidden cursor\x1b[?25h", "hidden cursor"),  # private CSI
        ("\x1b[2K\x1b[1Gprogress", "progress"),  # erase line, cursor moves
        ("\x1b]8;;https://x.org\x1b\\link\x1b]8;;\x1b\\ done", "link done"),  # OSC 8, ST
        ("\x1b]0;window title\x07text", "text"),  # OSC ended by BEL
        ("before \x1b]0;cut off", "before "),  # OSC never ended: to the line's end
        ("\x1bPdevice control\x1b\\after", "after"),  # DCS
        ("\x1b(Bcharset \x1b=keypad \x1b7saved", "charset keypad saved"),  # other escapes
        ("ends with a lone escape \x1b", "ends with a lone escape "),
        ("cut CSI \x1b[", "cut CSI "),
        ("plain text [1m stays; so does ~ and \\", "plain text [1m stays; so does ~ and \\"),
        ("", ""),
    ],
)
def test_strip_ansi_leaves_the_text_and_no_escape(line: str, text: str) -> None:
    assert strip_ansi(line) == text
    assert "\x1b" not in strip_ansi(line)


class _FakeEngine:
    """Just enough of an engine: each Codex message becomes 100 bytes for the client."""

    starting = False
    codex_ready = True

    def __init__(self) -> None:
        self.read = 0

    def start(self) -> list[object]:
        return []

    def prepare(self) -> None:
        pass

    def receive_codex(self, data: bytes) -> list[object]:
        self.read += 1
        return [ToClient(b"x" * 100)]

    def receive_client(self, data: bytes) -> list[object]:
        return []

    def client_lost(self) -> list[object]:
        return []

    def codex_lost(self, reason: str, *, retrying: bool = False) -> list[object]:
        return []


class _EndlessCodex(WaitingSends):
    async def receive(self) -> bytes:
        await trio.lowlevel.checkpoint()
        return b'{"method":"x"}'

    async def send(self, data: bytes) -> None:
        await trio.lowlevel.checkpoint()

    async def send_batch(self, messages: list[bytes]) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("waits", [True, False])
async def test_past_the_ceiling_only_a_codex_that_can_wait_is_no_longer_read(waits: bool) -> None:
    """A client that never reads: Codex on a pipe is left to wait once the client's
    backlog passes its ceiling; Codex on a WebSocket, which would drop the connection,
    is read on (the backlog grows instead), but not without bound: a Codex that floods
    the bridge does not grow its memory past :data:`WEBSOCKET_BACKLOG_CEILINGS` times
    the ceiling."""
    from bridge.shell.run_bridge import WEBSOCKET_BACKLOG_CEILINGS

    client_end, _never_read = trio.testing.lockstep_stream_pair()
    engine = _FakeEngine()

    @asynccontextmanager
    async def connect() -> AsyncIterator[CodexConnection]:
        yield CodexConnection(_EndlessCodex(), lambda: _said("gone"), waits=waits)  # type: ignore[arg-type]

    with trio.move_on_after(1):
        await run_bridge(
            LineStream(client_end, client_end),
            connect,
            engine,  # type: ignore[arg-type]
            client_ceiling=1000,
        )
    if waits:
        assert engine.read <= 1000 // 100 + 3, engine.read
    else:
        assert 1000 // 100 + 3 < engine.read <= WEBSOCKET_BACKLOG_CEILINGS * 1000 // 100 + 3


async def test_a_client_that_leaves_after_initialize_does_not_wait_for_codex_to_start() -> None:
    """initialize is answered without Codex; with nothing else waiting on it, a Codex that is
    still starting (here: never answers) holds the bridge up only briefly once the client
    leaves (long enough to report a start that fails at once)."""
    client_side, bridge_client_end = trio.testing.memory_stream_pair()
    _codex_side, bridge_codex_end = trio.testing.memory_stream_pair()
    client = LineStream(client_side, client_side)

    @asynccontextmanager
    async def connect() -> AsyncIterator[CodexConnection]:
        yield CodexConnection(
            LineStream(bridge_codex_end, bridge_codex_end), lambda: _said("fake Codex closed")
        )

    with trio.fail_after(5):  # the bridge would otherwise wait 30 s for Codex's handshake
        await client.send(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
        )
        await client_side.send_stream.aclose()
        await run_bridge(LineStream(bridge_client_end, bridge_client_end), connect, Engine())
        answer = msgspec.json.decode(await client.receive())
        assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1


async def test_the_shell_answers_codexs_clock_read_with_the_time_and_records_it() -> None:
    """Codex 0.169's experimental ``currentTime/read``: the engine keeps no clock, so the
    shell reads it; the recording holds what it read, and replays to the same answer."""
    client_side, bridge_client_end = trio.testing.memory_stream_pair()
    codex_side, bridge_codex_end = trio.testing.memory_stream_pair()
    client = LineStream(client_side, client_side)
    codex = LineStream(codex_side, codex_side)
    written = io.BytesIO()
    tap = Recorder(written, clock=time.monotonic, transport="stdio")
    answered: list[dict[str, Any]] = []
    before = int(time.time())

    async def fake_codex() -> None:
        init = msgspec.json.decode(await codex.receive())
        await codex.send(
            msgspec.json.encode({"id": init["id"], "result": {"userAgent": "codex/0.169.0"}})
        )
        await codex.send(b'{"id":41,"method":"currentTime/read","params":{"threadId":"thread-x"}}')
        while not answered:
            message = msgspec.json.decode(await codex.receive())
            if message.get("id") == 41 and "method" not in message:
                answered.append(message)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                _bridge_to_a_fake_codex(bridge_client_end, bridge_codex_end, tap=tap)
            )
            await client.send(
                b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}'
            )
            await fake_codex()
            await client_side.send_stream.aclose()
    [answer] = answered
    assert before <= answer["result"]["currentTimeAt"] <= int(time.time())
    assert set(answer["result"]) == {"currentTimeAt"}
    tap.close()
    recording = parse_recording(written.getvalue(), "clock.jsonl")
    [read] = [
        e.record
        for e in recording.entries
        if isinstance(e.record, EventRecord) and e.record.event == "clock_read"
    ]
    assert read.seconds == answer["result"]["currentTimeAt"]
    replay(recording)  # the engine sends Codex what was recorded, the time included


async def test_codex_draining_for_a_restart_is_a_lost_connection_and_the_bridge_reconnects() -> (
    None
):
    """Codex's daemon, before it restarts or updates itself, refuses requests with -32600
    ``{"reason": "serverShuttingDown"}`` ("retry after reconnecting"): the shell treats
    that as a lost Codex and reconnects, instead of handing the refusal on."""
    client_side, bridge_client_end = trio.testing.memory_stream_pair()
    client = LineStream(client_side, client_side)
    connections: list[LineStream] = []
    second = trio.Event()

    async def fake_codex(codex: LineStream, first: bool) -> None:
        with contextlib.suppress(
            trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError
        ):
            while True:
                message = msgspec.json.decode(await codex.receive())
                if message.get("method") == "initialize":
                    await codex.send(msgspec.json.encode({"id": message["id"], "result": {}}))
                    if not first:
                        second.set()
                elif message.get("method") == "model/list":
                    await codex.send(
                        msgspec.json.encode({"id": message["id"], "result": {"data": []}})
                    )
                elif message.get("method") == "thread/start" and first:
                    refusal = {
                        "id": message["id"],
                        "error": {
                            "code": -32600,
                            "message": "Server is draining; retry after reconnecting",
                            "data": {"reason": "serverShuttingDown"},
                        },
                    }
                    await codex.send(msgspec.json.encode(refusal))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:

            @asynccontextmanager
            async def connect() -> AsyncIterator[CodexConnection]:
                codex_side, bridge_codex_end = trio.testing.memory_stream_pair()
                codex = LineStream(codex_side, codex_side)
                nursery.start_soon(fake_codex, codex, not connections)
                connections.append(codex)
                try:
                    yield CodexConnection(
                        LineStream(bridge_codex_end, bridge_codex_end),
                        lambda: _said("fake Codex closed"),
                    )
                finally:
                    await codex_side.aclose()

            nursery.start_soon(
                functools.partial(
                    run_bridge,
                    LineStream(bridge_client_end, bridge_client_end),
                    connect,
                    Engine(),
                    restart=Restart(first=0.01),
                )
            )
            await client.send(
                b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
            )
            await client.send(
                b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/",'
                b'"mcpServers":[]}}'
            )
            answers = {}
            while 2 not in answers:
                message = msgspec.json.decode(await client.receive())
                answers[message.get("id")] = message
            await second.wait()
            await client_side.send_stream.aclose()
    assert len(connections) == 2
    error = answers[2]["error"]
    assert error["code"] == -32603 and "serverShuttingDown" in error["message"]


async def test_past_a_handshake_sent_before_the_shell_the_client_waits_for_a_connection() -> None:
    """serve's early start (bridge.shell.early) greets Codex before the shell runs: the engine
    is past its handshake and sends a client's request straight to Codex, so the shell reads
    the client only once the connection it would go on is there (a prompt was dropped)."""
    harness_engine = Engine()
    harness_engine.start()  # the handshake went out early...
    init = harness_engine.receive_codex(b'{"id":0,"result":{"userAgent":"codex/0.171.0"}}')
    assert init  # ...and was answered (initialized, model/list)
    client_side, bridge_client_end = trio.testing.memory_stream_pair()
    codex_side, bridge_codex_end = trio.testing.memory_stream_pair()
    client = LineStream(client_side, client_side)
    codex = LineStream(codex_side, codex_side)
    opening = trio.Event()

    @asynccontextmanager
    async def connect() -> AsyncIterator[CodexConnection]:
        await opening.wait()  # the adopted process takes a moment to become a connection
        yield CodexConnection(
            LineStream(bridge_codex_end, bridge_codex_end), lambda: _said("fake Codex closed")
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            functools.partial(run_bridge, handshake_sent=True),
            LineStream(bridge_client_end, bridge_client_end),
            connect,
            harness_engine,
        )
        with trio.fail_after(5):
            await client.send(b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}')
            await trio.testing.wait_all_tasks_blocked()
            opening.set()
            asked = msgspec.json.decode(await codex.receive())
        assert asked["method"] == "thread/list"
        nursery.cancel_scope.cancel()


#: Deltas Codex streams while the client below has stopped reading.
_BURST = 5_000
#: Turns of the scheduler that client's first write waits: time enough for the bridge to
#: read the whole burst, at one turn per read of the socket or the pipe.
_PAUSE_TURNS = 300


class _ChunkEngine(_FakeEngine):
    """Each Codex message is one word of an answer streamed to the client."""

    def receive_codex(self, data: bytes) -> list[object]:
        self.read += 1
        return [_chunk("s", "w ")]


_DELTA = b'{"method":"item/agentMessage/delta","params":{"delta":"w "}}'


async def _stream_answer(
    send_all: Callable[[bytes], Awaitable[None]], frame: bytes, paused: trio.Event
) -> None:
    """Codex streaming its answer: the first word; the client stops reading; the rest, in one
    go once the bridge has seen the client behind (a few turns into its first write)."""
    await send_all(frame)
    await paused.wait()
    for _ in range(10):
        await trio.lowlevel.checkpoint()
    await send_all(frame * (_BURST - 1))


async def _accept_websocket(stream: trio.SocketStream, protocol: ServerProtocol) -> None:
    """Reads a client's opening handshake from ``stream`` and accepts it."""
    from websockets.http11 import Request

    requests: list[Request] = []
    while not requests:
        protocol.receive_data(await stream.receive_some())
        requests = [e for e in protocol.events_received() if isinstance(e, Request)]
    protocol.send_response(protocol.accept(requests[0]))
    await stream.send_all(b"".join(protocol.data_to_send()))


async def _burst_websocket_server(paused: trio.Event, task_status: trio.TaskStatus[str]) -> None:
    """A Codex on a WebSocket streaming its answer as :func:`_stream_answer` says."""
    from websockets.frames import Frame, Opcode
    from websockets.server import ServerProtocol

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def handle(stream: trio.SocketStream) -> None:
        protocol = ServerProtocol()
        await _accept_websocket(stream, protocol)
        frame = Frame(Opcode.TEXT, _DELTA).serialize(mask=False, extensions=[])
        await _stream_answer(stream.send_all, frame, paused)
        await trio.sleep_forever()

    task_status.started(f"ws://127.0.0.1:{port}")
    await trio.serve_listeners(handle, listeners)


@pytest.mark.parametrize("transport", ["pipe", "websocket"])
async def test_what_codex_streamed_while_the_client_paused_reaches_it_merged_on_any_transport(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that stops reading for a while, then reads at once: what Codex streamed
    meanwhile, the bridge has read and merged by then, whether Codex is on a pipe or a
    WebSocket. Each read of the socket is handed to the engine whole, as the lines of a
    read of a pipe are; handed over a message per turn of the scheduler, most of the burst
    would still wait unmerged in the WebSocket's queue when the client resumed, and reach
    it a message per word."""
    from bridge.shell import run_bridge as shell
    from bridge.shell.codex_transport import connect_codex

    monkeypatch.setattr(shell, "BEHIND_AFTER", 0)  # behind from the first write that waits
    words: list[int] = []
    got_all, paused = trio.Event(), trio.Event()

    class PausingClient(WaitingSends):
        async def receive(self) -> bytes:
            await trio.sleep_forever()
            raise AssertionError

        async def send_batch(self, messages: list[bytes]) -> None:
            if not paused.is_set():
                paused.set()
                for _ in range(_PAUSE_TURNS):
                    await trio.lowlevel.checkpoint()
            for message in messages:
                text = msgspec.json.decode(message)["params"]["update"]["content"]["text"]
                words.append(len(text.split()))
            if sum(words) == _BURST:
                got_all.set()

        async def aclose(self) -> None:
            pass

    async with trio.open_nursery() as nursery:
        if transport == "websocket":
            url = await nursery.start(_burst_websocket_server, paused)

            connect: Connect = functools.partial(connect_codex, url)
        else:
            codex_end, bridge_end = trio.testing.memory_stream_pair()
            nursery.start_soon(_stream_answer, codex_end.send_all, _DELTA + b"\n", paused)

            @asynccontextmanager
            async def pipe() -> AsyncIterator[CodexConnection]:
                yield CodexConnection(LineStream(bridge_end, bridge_end), lambda: _said("gone"))

            connect = pipe

        engine = _ChunkEngine()
        nursery.start_soon(run_bridge, PausingClient(), connect, engine)  # type: ignore[arg-type]
        with trio.fail_after(30):
            await got_all.wait()
        nursery.cancel_scope.cancel()
    assert engine.read == _BURST
    # The first word went out before the pause; the rest came in one or a few merged chunks
    # (as many as reads of the socket or pipe ended before the bridge saw the client behind).
    assert words[0] == 1
    assert len(words) <= 20, f"{len(words)} chunks for {_BURST} deltas: {words[:20]}..."
    assert max(words) >= _BURST // 2, words[:20]


#: What the flooding Codex below sends: more than the socket's buffers at both ends hold.
_FLOOD_FRAMES = 4096
_FLOOD_FRAME = 4096


async def _flooding_websocket_server(
    sent_all: trio.Event, task_status: trio.TaskStatus[str]
) -> None:
    """A Codex on a WebSocket that sends :data:`_FLOOD_FRAMES` messages as fast as its
    socket takes them, numbered, then waits."""
    from websockets.frames import Frame, Opcode
    from websockets.server import ServerProtocol

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def handle(stream: trio.SocketStream) -> None:
        protocol = ServerProtocol(max_size=None)
        await _accept_websocket(stream, protocol)
        for n in range(_FLOOD_FRAMES):
            data = b"%08d" % n + b"x" * (_FLOOD_FRAME - 8)
            await stream.send_all(Frame(Opcode.TEXT, data).serialize(mask=False, extensions=[]))
        sent_all.set()
        while not protocol.close_expected():  # until the bridge closes: answer, and close
            data = await stream.receive_some()
            if not data:
                break
            protocol.receive_data(data)
            await stream.send_all(b"".join(protocol.data_to_send()))
        await stream.aclose()

    task_status.started(f"ws://127.0.0.1:{port}")
    await trio.serve_listeners(handle, listeners)


async def test_a_websocket_holds_a_bounded_backlog_and_loses_none_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Codex that sends faster than the bridge takes: what the bridge has read and not
    handed on stays under the inbox's limit (the rest waits in the socket, for Codex to
    wait on), and once the bridge takes it, every message arrives, in order."""
    from bridge.shell import websocket
    from bridge.shell.codex_transport import connect_codex

    limit = 256 * 1024
    monkeypatch.setattr(websocket, "INBOX_LIMIT", limit)
    sent_all = trio.Event()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(_flooding_websocket_server, sent_all)
            async with connect_codex(url) as connection:
                await trio.testing.wait_all_tasks_blocked(0.05)
                inbox = connection.stream._inbox  # type: ignore[attr-defined]
                held = sum(map(len, inbox.messages))
                # At most one read of the socket past the limit.
                assert held <= limit + 256 * 1024, f"{held} bytes held"
                assert not sent_all.is_set(), "the socket was read without bound"
                numbers = []
                for _ in range(_FLOOD_FRAMES):
                    numbers.append(int((await connection.stream.receive())[:8]))
                assert numbers == list(range(_FLOOD_FRAMES))
                await sent_all.wait()
            nursery.cancel_scope.cancel()


def test_no_class_of_the_bridge_derives_from_one_of_websockets() -> None:
    """websockets' trio connection keeps how it handles each frame to itself (its "Private
    methods"): a subclass that overrides that, as one here did to take every frame of a read
    at once, breaks when a release changes it. The public Sans-I/O core does that job
    (``bridge/shell/websocket.py``)."""
    import ast
    from pathlib import Path

    import bridge

    derived = []
    for path in sorted(Path(bridge.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        theirs = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("websockets")
            for alias in node.names
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base) for base in node.bases]
                if any(b in theirs or b.startswith("websockets.") for b in bases):
                    derived.append(f"{path.name}: {node.name}({', '.join(bases)})")
    assert derived == []


async def test_a_websocket_hands_out_what_it_read_at_once_yet_lets_its_reader_read_on() -> None:
    """Messages a WebSocket's reader has parsed go to the consumer without a turn of the
    scheduler each, but not all of them in a row: every ``TURN_EVERY`` the reader gets a
    turn to read on (Codex drops a WebSocket whose socket stays full)."""
    from bridge.shell.websocket import TURN_EVERY, WebSocketInbox

    inbox = WebSocketInbox()
    count = 10 * TURN_EVERY
    for n in range(count):
        inbox.put(str(n).encode(), fin=True)
    inbox.put(b"frag", fin=False)
    inbox.put(b"mented", fin=True)
    inbox.close()
    turns = 0

    async def reader() -> None:
        nonlocal turns
        while True:
            await trio.lowlevel.checkpoint()
            turns += 1

    received = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.lowlevel.checkpoint()
        start = turns
        while inbox.messages:
            received.append(await inbox.get())
        taken = turns - start
        nursery.cancel_scope.cancel()
    with pytest.raises(EOFError):  # once all is taken
        await inbox.get()
    assert received == [str(n).encode() for n in range(count)] + [b"fragmented"]
    # A turn each TURN_EVERY messages (trio may run the reader before or after the consumer
    # in each round, so one more or less at either end), not one a message.
    assert count // TURN_EVERY - 2 <= taken <= count // TURN_EVERY + 1, taken
