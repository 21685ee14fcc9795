"""The engine's calls to a machine's own ``codex exec-server`` (``MachineCall``): its file
methods, which Codex's app-server has no way to aim at a machine (its ``fs/*`` act on its
own machine only).

Each machine gets a connection of its own while calls come, apart from Codex's: for an ssh
machine one more ``ssh HOST codex exec-server --listen stdio`` (the user's ssh, the same
account and Codex as Codex's link; the first line the remote Codex's version, then one
JSON-RPC message a line); for a container or a command machine the same command as its
link's (``podman exec -i CONTAINER CODEX exec-server --listen stdio``; no version line);
for a ws:// machine a WebSocket to its URL with its token. It
begins with the exec-server's handshake (``initialize {clientName}``, ``initialized``),
carries the calls (the engine's method and parameters, ids of its own), and closes once no
call has come for :data:`IDLE_SECONDS`. It works the same in a ``serve`` whose links relay
Codex's connections and in one attached to the daemon (whose links only check): it needs
the machine's spec and ssh, not the relay.

A call that cannot be carried (ssh fails, the exec-server ends, no answer within
:data:`CALL_SECONDS`) is answered with an error (-32603) saying why, as is every call
waiting on that connection.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import msgspec
import trio
from websockets.exceptions import ConnectionClosed
from websockets.trio.client import ClientConnection, connect

from .. import machines as spec_of
from ..codex import files as codex_files
from ..engine import MachineCall
from ..machines import MachineSpec
from ..token_urls import websocket_proxy
from .effects import MachineAnswer
from .processes import MAX_MESSAGE, Lines, StderrTail, close_ssh, could_not_run

log = logging.getLogger(__name__)

#: A connection no call used for this long is closed (a rewind's reads and its writes,
#: a revert apart, share one).
IDLE_SECONDS = 10.0
#: Reaching the machine and its handshake, and then each call, may take this long.
CALL_SECONDS = 60.0
CLOSE_SECONDS = 2.0
#: The code of an answer the shell gives itself (the call was not carried).
NOT_CARRIED = -32603

Answered = Callable[[MachineAnswer], None]


class _Error(msgspec.Struct):
    code: int = NOT_CARRIED
    message: str = ""


class _Message(msgspec.Struct):
    id: int | str | None = None
    #: Empty when absent (msgspec's ``Raw`` takes no union).
    result: msgspec.Raw = msgspec.Raw(b"")
    error: _Error | None = None


class _Refused(Exception):
    """The connection cannot carry calls: why."""


@dataclass(eq=False)
class _Session:
    spec: MachineSpec
    send: trio.MemorySendChannel[tuple[MachineCall, Answered]]
    receive: trio.MemoryReceiveChannel[tuple[MachineCall, Answered]]
    #: Sent and not answered yet, by the id this connection gave them.
    waiting: dict[int, Answered] = field(default_factory=dict)
    #: No more calls go on this one (it is closing): a new call opens another.
    closing: bool = False
    #: When (trio's clock) a call was last sent or answered.
    progress: float = 0.0


class _Transport:
    """One line or frame of JSON-RPC each way."""

    async def send(self, data: bytes) -> None:
        raise NotImplementedError

    async def receive(self) -> bytes | None:
        raise NotImplementedError


class MachineCalls:
    """The calls of one ``serve`` to its machines' exec-servers."""

    def __init__(
        self,
        specs: Sequence[MachineSpec],
        ssh: list[str],
        *,
        client_name: str = "codex-acp-bridge",
        ready: Callable[[MachineSpec], Awaitable[MachineSpec]] | None = None,
    ) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self.ssh = ssh
        #: The machine as its link reaches it (a container: with the Codex brought there,
        #: brought first if it must be); raises :class:`MachineError` when it cannot be.
        self.ready = ready
        self.client_name = client_name
        self._sessions: dict[str, _Session] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Carry calls until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def call(self, call: MachineCall, answered: Answered) -> None:
        """Carry ``call`` to its machine; ``answered`` gets the answer (never twice)."""
        spec = self.specs.get(call.machine)
        if spec is None or self._nursery is None:
            answered((None, NOT_CARRIED, f"this bridge runs no link to the machine {call.machine}"))
            return
        session = self._sessions.get(call.machine)
        if session is None or session.closing:
            send, receive = trio.open_memory_channel[tuple[MachineCall, Answered]](1000)
            session = _Session(spec, send, receive)
            self._sessions[call.machine] = session
            self._nursery.start_soon(self._run_session, session)
        try:
            session.send.send_nowait((call, answered))
        except trio.WouldBlock:
            answered((None, NOT_CARRIED, f"too many calls waiting for the machine {spec.name}"))

    async def _run_session(self, session: _Session) -> None:
        spec = session.spec
        why = "the connection ended"
        try:
            async with self._open(spec) as transport:
                with trio.fail_after(CALL_SECONDS):
                    await self._handshake(transport)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._read, session, transport, nursery.cancel_scope)
                    await self._write(session, transport)
                    nursery.cancel_scope.cancel()
        except Exception as caught:  # every failure is the calls' answer
            why = _why(spec, caught)
        finally:
            session.closing = True
            if self._sessions.get(spec.name) is session:
                del self._sessions[spec.name]
            failed = list(session.waiting.values())
            session.waiting.clear()
            while True:
                try:
                    _call, answered = session.receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
                failed.append(answered)
            if failed:
                log.warning(
                    "machine %s: %d file call(s) not carried: %s", spec.name, len(failed), why
                )
            for answered in failed:
                answered((None, NOT_CARRIED, f"machine {spec.name}: {why}"))

    async def _handshake(self, transport: _Transport) -> None:
        hello = {
            "id": 0,
            "method": codex_files.EXEC_INITIALIZE,
            "params": {"clientName": self.client_name},
        }
        await transport.send(msgspec.json.encode(hello))
        while True:
            data = await transport.receive()
            if data is None:
                raise _Refused("the exec-server ended before its handshake")
            if not data.strip():
                continue
            message = msgspec.json.decode(data, type=_Message)
            if message.id != 0:
                continue
            if message.error is not None:
                raise _Refused(f"the exec-server refused initialize: {message.error.message}")
            break
        await transport.send(
            msgspec.json.encode({"method": codex_files.EXEC_INITIALIZED, "params": {}})
        )

    async def _write(self, session: _Session, transport: _Transport) -> None:
        """Send the calls as they come; return once idle."""
        next_id = 1
        while True:
            with trio.move_on_after(IDLE_SECONDS) as idle:
                call, answered = await session.receive.receive()
            if idle.cancelled_caught:
                if session.waiting:
                    if trio.current_time() - session.progress > CALL_SECONDS:
                        raise trio.TooSlowError
                    continue
                session.closing = True  # no checkpoint since the check: no call lost
                return
            session.waiting[next_id] = answered
            request = b'{"id":%d,"method":%s,"params":%s}' % (
                next_id,
                msgspec.json.encode(call.method),
                call.params,
            )
            next_id += 1
            session.progress = trio.current_time()
            await transport.send(request)

    async def _read(
        self, session: _Session, transport: _Transport, scope: trio.CancelScope
    ) -> None:
        while (data := await transport.receive()) is not None:
            if not data.strip():
                continue
            try:
                message = msgspec.json.decode(data, type=_Message)
            except (msgspec.DecodeError, msgspec.ValidationError):
                log.warning("machine %s said %r, not JSON-RPC", session.spec.name, data[:200])
                continue
            if not isinstance(message.id, int):
                continue  # a notification
            answered = session.waiting.pop(message.id, None)
            if answered is None:
                continue
            session.progress = trio.current_time()
            if message.error is not None:
                answered((None, message.error.code, message.error.message))
            else:
                answered((bytes(message.result) or b"null", 0, ""))
        raise _Refused("the exec-server ended")

    @contextlib.asynccontextmanager
    async def _open(self, spec: MachineSpec) -> AsyncIterator[_Transport]:
        if self.ready is not None:
            try:
                spec = await self.ready(spec)
            except spec_of.MachineError as exc:
                raise _Refused(str(exc)) from None
        if spec.relayed:
            async with _process(spec, self.ssh) as transport:
                yield transport
        else:
            async with _websocket(spec) as transport:
                yield transport


def _why(spec: MachineSpec, caught: BaseException) -> str:
    """Why a connection failed, in words (a nursery's group: its first failure's)."""
    while isinstance(caught, BaseExceptionGroup) and caught.exceptions:
        caught = caught.exceptions[0]
    if isinstance(caught, _Refused):
        return str(caught)
    if isinstance(caught, trio.TooSlowError):
        return f"no answer from the exec-server on {spec.where()} within {CALL_SECONDS:.0f} s"
    if isinstance(caught, OSError):
        return f"the connection to {spec.where()} failed: {caught.strerror or caught}"
    log.debug("machine %s: the connection failed", spec.name, exc_info=caught)
    return f"the connection to {spec.where()} failed: {type(caught).__name__}: {caught}"


class _Lines(_Transport):
    def __init__(
        self,
        send: Callable[[bytes], Awaitable[None]],
        receive: Callable[[], Awaitable[bytes | None]],
    ) -> None:
        self._send, self._receive = send, receive

    async def send(self, data: bytes) -> None:
        await self._send(data + b"\n")

    async def receive(self) -> bytes | None:
        return await self._receive()


@contextlib.asynccontextmanager
async def _process(spec: MachineSpec, ssh: list[str]) -> AsyncIterator[_Transport]:
    """The exec-server the machine's link runs (over ssh, in a container, through a
    command), on the stdio of a process of this bridge's."""
    argv = spec_of.exec_server_argv(spec, ssh)
    try:
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as exc:
        raise _Refused(could_not_run(argv, exc)) from None
    assert process.stdin and process.stdout and process.stderr
    stderr = StderrTail()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stderr.collect, process.stderr)
            lines = _Ended(process, stderr, spec, Lines(process.stdout))
            if spec_of.version_first(spec):
                with trio.fail_after(CALL_SECONDS):
                    await lines.next()  # the remote Codex's version
            yield _Lines(process.stdin.send_all, lines.next)
            nursery.cancel_scope.cancel()
    finally:
        await close_ssh(process)


class _Ended:
    """A process's lines; ended before a word, why (in the runtime's or ssh's words)."""

    def __init__(
        self, process: trio.Process, stderr: StderrTail, spec: MachineSpec, lines: Lines
    ) -> None:
        self._process, self._stderr, self._spec, self._lines = process, stderr, spec, lines
        self._said = False

    async def next(self) -> bytes | None:
        line = await self._lines.next()
        if line is None and not self._said:
            raise _Refused(await self.why())
        self._said = True
        return line

    async def why(self) -> str:
        await self._process.wait()
        await self._stderr.finished()
        return spec_of.explain_failure(self._spec, self._process.returncode, self._stderr.text())


class _Frames(_Transport):
    def __init__(self, connection: ClientConnection) -> None:
        self._connection = connection

    async def send(self, data: bytes) -> None:
        await self._connection.send(data.decode())

    async def receive(self) -> bytes | None:
        try:
            message = await self._connection.recv()
        except ConnectionClosed:
            return None
        return message.encode() if isinstance(message, str) else bytes(message)


@contextlib.asynccontextmanager
async def _websocket(spec: MachineSpec) -> AsyncIterator[_Transport]:
    if spec.token_file is None:
        raise _Refused(f"no token for the exec-server at {spec.url} here")
    refused = spec_of.token_refusal(spec.name, spec.url)
    if refused is not None:  # before its token is read, let alone sent
        raise _Refused(refused)
    try:
        token = (await trio.Path(spec.token_file).read_text(encoding="utf-8")).strip()
    except OSError as exc:
        raise _Refused(
            f"cannot read its token file {spec.token_file}: {exc.strerror or exc}"
        ) from None
    async with connect(
        spec.url,
        additional_headers={"Authorization": f"Bearer {token}"},
        max_size=MAX_MESSAGE,
        compression=None,
        open_timeout=CALL_SECONDS,
        close_timeout=CLOSE_SECONDS,
        proxy=websocket_proxy(spec.url),
    ) as connection:
        yield _Frames(connection)
