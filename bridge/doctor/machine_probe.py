"""Reaching each machine the user named, as ``serve``'s link does (I/O, with trio).

An ssh machine is reached with the command the link runs for each of Codex's connections
(:func:`bridge.machines.exec_server_command` over :func:`bridge.machines.ssh_argv`, the
user's ssh with the bridge's options): ``CODEX --version && exec CODEX exec-server --listen
stdio``. What comes back says each stage: ssh's exit status 255 and its words (a refused
login, an unknown or changed host key) or no line within :data:`REACH_SECONDS`: not
reached; exit status 127: no Codex there; the first line: the remote Codex's version; then
the exec-server's answer to ``initialize``, within :data:`INITIALIZE_SECONDS`.

A container (``podman://``, ``docker://``) or a command machine is reached with the same
commands as its link's, with no shell in between: ``CODEX --version`` there first (the
runtime's exit status 125 and its words: a missing or stopped container, not reached; 126
or 127: no Codex there), then ``CODEX exec-server --listen stdio`` and its ``initialize``.

A ``ws://`` machine (an exec-server someone runs) gets a TCP connection, then a WebSocket
handshake with its token (``Authorization: Bearer``, as Codex sends it) and the same
``initialize``; none of it when its URL is plain-text ``ws://`` to a host that is not
loopback (:mod:`bridge.token_urls`).

The exec-server's ``initialize``, as Codex 0.169 and 0.171 answer it over ``--listen
stdio`` (and over ``ws://``): ``{"jsonrpc": "2.0", "id": 1, "method": "initialize",
"params": {"clientName": "codex-acp-bridge"}}``; ``clientName`` is required (``{}`` and
app-server's ``clientInfo`` are refused with -32602 "missing field `clientName`"), other
members are ignored. The answer (no ``jsonrpc`` member) is ``{"id": 1, "result":
{"sessionId": UUID, "environmentInfo": {"shell": {"name", "path"}, "executorVersion":
"0.171.0", "cwd": "file:///...", "userHomeDir", "platformOs", "tempDir", "capabilities",
...}}}``. ``executorVersion`` is ``0.0.0`` for a Codex binary outside its npm package (a
copy of the pinned binary, over a real sshd, said so; ``--version`` still said 0.171.0), so
an ssh machine's version is its ``--version``'s. A line that is not JSON is answered ``{"error": {"code": -32600, ...}, "id": -1}``.
The exec-server ends when its stdin closes.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import msgspec
import trio

from .. import machines as spec_of
from ..machines import MachineSpec
from ..shell.processes import MAX_MESSAGE, Lines, StderrTail, close_ssh, could_not_run
from ..shell.sandboxes import process_owner
from ..token_urls import websocket_proxy
from .findings import ExecServer, MachineFound

#: How long reaching a machine may take: ssh's login and the remote ``codex --version``
#: (ssh's own ``ConnectTimeout``, when the user set one, comes first).
REACH_SECONDS = 20.0
#: How long the exec-server may take to answer ``initialize`` once it runs.
INITIALIZE_SECONDS = 10.0
#: How long ssh has to end after its stdin closed (the exec-server ends at EOF).
CLOSE_SECONDS = 2.0

#: What doctor sends the exec-server (see the module docstring).
INITIALIZE = msgspec.json.encode(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"clientName": "codex-acp-bridge"},
    }
)


class _Shell(msgspec.Struct):
    name: str = ""


class _EnvironmentInfo(msgspec.Struct):
    executorVersion: str = ""
    shell: _Shell = msgspec.field(default_factory=_Shell)
    cwd: str = ""


class _InitializeResult(msgspec.Struct):
    environmentInfo: _EnvironmentInfo = msgspec.field(default_factory=_EnvironmentInfo)


class _Error(msgspec.Struct):
    message: str = ""


class _Answer(msgspec.Struct):
    id: Any = None
    #: Empty when absent (msgspec's ``Raw`` takes no union).
    result: msgspec.Raw = msgspec.Raw(b"")
    error: _Error | None = None


async def probe_all(
    specs: Sequence[MachineSpec],
    ssh: list[str],
    local_version: str | None,
    codex_program: str | None = None,
) -> tuple[MachineFound, ...]:
    """Every machine at once; each result in the order named. ``codex_program``: the
    Codex here (a session's container mounts its vendor folder)."""
    found: list[MachineFound | None] = [None] * len(specs)

    async def one(i: int, spec: MachineSpec) -> None:
        if spec.scheme == spec_of.DEVCONTAINER:
            found[i] = await probe_devcontainer(spec, ssh, local_version)
        elif spec.scheme == spec_of.SANDBOX:
            found[i] = await probe_sandbox(spec, ssh, local_version, codex_program)
        elif spec.relayed:
            found[i] = await probe_relayed(spec, ssh, local_version)
        else:
            found[i] = await probe_ws(spec, local_version)

    async with trio.open_nursery() as nursery:
        for i, spec in enumerate(specs):
            nursery.start_soon(one, i, spec)
    return tuple(f for f in found if f is not None)


def login_command(spec: MachineSpec, ssh: list[str]) -> str:
    """The ssh login to ``spec``'s host as the user types it in a terminal: their ssh
    command, without the bridge's options (which forbid a prompt) or a remote command.
    A container or a command machine: what runs a program there (``podman exec -i CTR``)."""
    if not spec.ssh:
        return shlex.join(spec_of.place_argv(spec, ssh, [])[:-1])
    argv = [*ssh]
    if spec.port:
        argv += ["-p", str(spec.port)]
    if spec.user:
        argv += ["-l", spec.user]
    return shlex.join([*argv, spec.host])


async def probe_relayed(
    spec: MachineSpec,
    ssh: list[str],
    local_version: str | None,
    *,
    reach_seconds: float = REACH_SECONDS,
    initialize_seconds: float = INITIALIZE_SECONDS,
) -> MachineFound:
    """Reach an ssh machine, a container or a command machine as the link does (see the
    module docstring). With ``?codex=auto`` (an ssh machine), or no Codex given by the user
    (a container): the Codex the bridge brought there, once it has."""
    if spec.bring and local_version:
        brought = _brought_to if spec.ssh else _brought_there
        spec = await brought(spec, ssh, local_version, reach_seconds)
    found = MachineFound(
        name=spec.name,
        where=spec.where(),
        ssh=True,
        kind=spec.scheme,
        codex=spec.codex,
        login=login_command(spec, ssh),
        local_version=local_version,
    )
    reaching = _Reaching(spec, ssh, reach_seconds, initialize_seconds)
    return await (reaching.over_ssh if spec.ssh else reaching.by_command)(found)


@dataclass(frozen=True)
class _Reaching:
    """A relayed machine being reached, and how long each stage may take."""

    spec: MachineSpec
    ssh: list[str]
    reach_seconds: float
    initialize_seconds: float

    async def over_ssh(self, found: MachineFound) -> MachineFound:
        """One ssh connection: the remote ``codex --version``'s line, then its exec-server."""
        spec, ssh, reach_seconds = self.spec, self.ssh, self.reach_seconds
        argv = spec_of.ssh_argv(spec, ssh, spec_of.exec_server_command(spec))
        started = time.monotonic()
        try:
            process = await _open_piped(argv)
        except OSError as exc:
            return _with(found, unreachable=could_not_run(argv, exc))
        async with _ExecServerProcess.running(process) as server:
            first: bytes | None = None
            with trio.move_on_after(reach_seconds) as waited:
                first = await server.lines.next()
                if first is None:
                    await process.wait()
            took = time.monotonic() - started
            if waited.cancelled_caught:
                words = _words(server.stderr.text())
                said = f": {words}" if words else ""
                return _with(
                    found,
                    reach_seconds=took,
                    unreachable=f"no answer from {spec.where()} within {reach_seconds:g} s{said}",
                )
            if first is None:
                await server.stderr.finished()
                return _ended_early(found, spec, process.returncode, server.stderr.text(), took)
            found = _with(found, reach_seconds=took, version_line=first.decode(errors="replace"))
            # What the exec-server says, not what ``--version`` said before it.
            server.stderr.mark()
            return _with(found, server=await server.initialize(self.initialize_seconds))

    async def by_command(self, found: MachineFound) -> MachineFound:
        """A container or a command machine: its Codex's ``--version``, then its
        exec-server's ``initialize``, each a command of its own."""
        spec, ssh, reach_seconds = self.spec, self.ssh, self.reach_seconds
        argv = spec_of.version_argv(spec, ssh)
        started = time.monotonic()
        try:
            with trio.move_on_after(reach_seconds) as waited:
                done = await _ran(argv)
        except OSError as exc:
            return _with(found, unreachable=could_not_run(argv, exc))
        took = time.monotonic() - started
        if waited.cancelled_caught:
            return _with(
                found,
                reach_seconds=took,
                unreachable=f"no answer from {spec.where()} within {reach_seconds:g} s",
            )
        stderr = done.stderr.decode(errors="replace")
        if done.returncode != 0:
            return _ended_early(found, spec, done.returncode, stderr, took)
        line = done.stdout.decode(errors="replace").strip().splitlines()
        found = _with(found, reach_seconds=took, version_line=line[0] if line else "")
        argv = spec_of.exec_server_argv(spec, ssh)
        try:
            process = await _open_piped(argv)
        except OSError as exc:  # gone since a moment ago
            return _with(found, unreachable=could_not_run(argv, exc))
        async with _ExecServerProcess.running(process) as server:
            return _with(found, server=await server.initialize(self.initialize_seconds))


async def probe_devcontainer(
    spec: MachineSpec, ssh: list[str], local_version: str | None
) -> MachineFound:
    """A dev container: the one up for its folder (the devcontainers CLI labels it with
    ``devcontainer.local_folder``), reached as a container. Doctor brings none up: one
    that is not up is said so, with the command that would (the link runs it at the
    first prompt there)."""
    runtime = spec.runtime or "docker"
    found = MachineFound(
        name=spec.name, where=spec.where(), ssh=True, kind=spec.scheme, codex=spec.codex
    )
    up = shlex.join(spec_of.up_argv(spec))
    argv = [runtime, "ps", "--quiet", "--filter", f"label=devcontainer.local_folder={spec.host}"]
    try:
        with trio.move_on_after(REACH_SECONDS):
            done = await _ran(argv)
            if done.returncode != 0:
                words = _words(done.stderr.decode(errors="replace"))
                return _with(found, unreachable=f"{runtime} ps: {words or done.returncode}")
            running = done.stdout.decode(errors="replace").split()
            if not running:
                return _with(
                    found,
                    unreachable=(
                        f"not up (the bridge brings it up at the first prompt there; to check "
                        f"it now: {up})"
                    ),
                )
            container = replace(spec, scheme=runtime, host=running[0][:12], runtime="")
            return replace(await probe_relayed(container, ssh, local_version), name=spec.name)
        return _with(found, unreachable=f"{runtime} ps took over {REACH_SECONDS:.0f} s")
    except OSError as exc:
        return _with(found, unreachable=could_not_run(argv, exc))


async def probe_sandbox(
    spec: MachineSpec, ssh: list[str], local_version: str | None, codex_program: str | None
) -> MachineFound:
    """A machine with a container per session: one made as a session's would be (the
    image, this bridge's Codex mounted, no folder of the user's), reached as a container,
    and removed."""
    found = MachineFound(
        name=spec.name, where=spec.where(), ssh=True, kind=spec.runtime, codex=spec.codex
    )
    vendor = spec_of.vendor_folder(codex_program) if codex_program else None
    if vendor is None:
        return _with(
            found,
            unreachable=(
                f"this bridge's Codex ({codex_program or 'none found'}) is not in a Codex "
                "package's vendor folder to mount into the containers"
            ),
        )
    container = f"codex-acp-bridge-doctor-{os.getpid()}-{spec.name}"
    argv = spec_of.sandbox_run_argv(spec, container, vendor[0], (), process_owner())
    try:
        with trio.move_on_after(REACH_SECONDS * 3) as waited:
            done = await _ran(argv)
        if waited.cancelled_caught:
            return _with(
                found, unreachable=f"{spec.runtime} run took over {REACH_SECONDS * 3:.0f} s"
            )
        if done.returncode != 0:
            words = _words(done.stderr.decode(errors="replace")) or f"exit status {done.returncode}"
            return _with(found, unreachable=f"{spec.runtime} run: {words}")
        box = spec_of.sandbox_box(spec, spec.name, container)
        return replace(await probe_relayed(box, ssh, local_version), where=spec.where())
    except OSError as exc:
        return _with(found, unreachable=could_not_run(argv, exc))
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(REACH_SECONDS):
            await _ran([spec.runtime, "rm", "--force", "--time", "0", container])


async def _open_piped(argv: list[str]) -> trio.Process:
    """``argv`` started with its stdin, stdout and stderr piped to this process."""
    return await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


class _ExecServerProcess:
    """A process that runs an exec-server (ssh's, or a container's or command's): its
    stdout as lines, its stderr collected while it runs."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin and process.stdout
        self.process = process
        self.lines = Lines(process.stdout)
        self.stderr = _Stderr()

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, process: trio.Process) -> AsyncIterator[_ExecServerProcess]:
        """``process``'s exec-server while its stderr is read; ended after (its stdin
        closed, as the link ends it), however the caller leaves."""
        assert process.stderr
        server = cls(process)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(server.stderr.collect, process.stderr)
                yield server
                nursery.cancel_scope.cancel()
        finally:
            await close_ssh(process)

    async def initialize(self, seconds: float) -> ExecServer:
        """The exec-server's answer to :data:`INITIALIZE`, within ``seconds``."""
        stdin = self.process.stdin
        assert stdin is not None
        return await _initialize(
            stdin.send_all, self.lines.next, seconds, lambda: _ended(self.process, self.stderr)
        )


class _Stderr(StderrTail):
    """ssh's stderr, read to its end: a process that ended has its last words read before
    they are quoted. From a mark on (what came after ``--version``), unless nothing came
    after it: what the exec-server wrote at once may have been read before the mark was
    set (the two come in one stream, with no boundary between them)."""

    def __init__(self) -> None:
        super().__init__()
        self._mark = 0

    def mark(self) -> None:
        self._mark = len(super().text())

    def text(self) -> str:
        whole = super().text()
        after = whole[self._mark :] if self._mark <= len(whole) else whole
        return after if after.strip() else whole


async def _brought_to(
    spec: MachineSpec, ssh: list[str], local_version: str, seconds: float
) -> MachineSpec:
    """``spec`` with the Codex the bridge brought to the ssh machine's cache folder, when
    that machine says where that is; else ``spec`` as it is."""
    with trio.move_on_after(seconds), contextlib.suppress(OSError):
        done = await _ran(spec_of.ssh_argv(spec, ssh, spec_of.SSH_FACTS))
        facts = spec_of.ssh_facts(done.stdout.decode(errors="replace"), local_version)
        if done.returncode == 0 and facts is not None:
            return replace(spec, codex=f"{facts[1]}/bin/codex")
    return spec


async def _brought_there(
    spec: MachineSpec, ssh: list[str], local_version: str, seconds: float
) -> MachineSpec:
    """``spec`` with the Codex the bridge brought into the container, when that one is
    there and of ``local_version``; else ``spec`` as it is."""
    there = replace(spec, codex=f"{spec_of.brought_folder(local_version)}/bin/codex")
    with trio.move_on_after(seconds), contextlib.suppress(OSError):
        done = await _ran(spec_of.version_argv(there, ssh))
        said = spec_of.codex_version(done.stdout.decode(errors="replace"))
        if done.returncode == 0 and said == local_version:
            return there
    return spec


def _ended_early(
    found: MachineFound, spec: MachineSpec, status: int | None, stderr: str, took: float
) -> MachineFound:
    """ssh (or a container's runtime, or a command) ended before the Codex there said its
    version: why, in its own words."""
    if not spec.ssh and status not in (126, 127):
        # The runtime's own failure (podman and docker: 125 for a missing container,
        # 255 or 125 for a stopped one), or the command's.
        words = _words(stderr) or f"exit status {status}"
        return _with(found, reach_seconds=took, unreachable=words)
    if status == 255:
        # ssh's own failure (its convention): the machine was not reached.
        words = _words(stderr) or "exit status 255"
        return _with(found, reach_seconds=took, unreachable=words)
    words = _words(stderr)
    if status == 127 or "not found" in words:
        said = f": {words}" if words else ""
        return _with(found, reach_seconds=took, codex_failure=f"{spec.codex!r} not found{said}")
    said = f": {words}" if words else ""
    return _with(
        found,
        reach_seconds=took,
        codex_failure=f"`{spec.codex} --version`: exit status {status}{said}",
    )


async def _ended(process: trio.Process, stderr: _Stderr) -> str:
    with trio.move_on_after(CLOSE_SECONDS):
        await process.wait()
    await stderr.finished()
    words = _words(stderr.text())
    status = f"exit status {process.returncode}" if process.returncode is not None else "it"
    return f"the exec-server ended ({status}){': ' + words if words else ''}"


async def _initialize(
    send: Callable[[bytes], Awaitable[None]],
    receive: Callable[[], Awaitable[bytes | None]],
    seconds: float,
    ended: Callable[[], Awaitable[str]],
) -> ExecServer:
    """Send :data:`INITIALIZE`, read up to its answer (``receive() -> bytes | None``)."""
    started = time.monotonic()
    try:
        with trio.fail_after(seconds):
            await send(INITIALIZE + b"\n")
            while True:
                line = await receive()
                if line is None:
                    return ExecServer(time.monotonic() - started, failure=await ended())
                if not line.strip():
                    continue
                try:
                    answer = msgspec.json.decode(line, type=_Answer)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    text = line.decode(errors="replace")[:200]
                    return ExecServer(
                        time.monotonic() - started,
                        failure=f"it said {text!r}, not JSON-RPC",
                    )
                if answer.id != 1:
                    continue  # a notification, or another's answer
                break
    except trio.TooSlowError:
        return ExecServer(
            time.monotonic() - started, failure=f"no answer to initialize within {seconds:g} s"
        )
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return ExecServer(time.monotonic() - started, failure=await ended())
    took = time.monotonic() - started
    if answer.error is not None or not answer.result:
        said = answer.error.message if answer.error is not None else "no result"
        return ExecServer(took, failure=f"it refused initialize: {said}")
    try:
        info = msgspec.json.decode(answer.result, type=_InitializeResult).environmentInfo
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return ExecServer(took, failure=f"it answered initialize with something else: {exc}")
    return ExecServer(
        took, executor_version=info.executorVersion, shell=info.shell.name, cwd=info.cwd
    )


async def probe_ws(
    spec: MachineSpec,
    local_version: str | None,
    *,
    reach_seconds: float = 10.0,
    initialize_seconds: float = INITIALIZE_SECONDS,
) -> MachineFound:
    """A TCP connection to a ws:// machine, then its WebSocket handshake (with the token)
    and ``initialize``."""
    from websockets.exceptions import InvalidHandshake, InvalidStatus, WebSocketException
    from websockets.trio.client import connect

    found = MachineFound(
        name=spec.name,
        where=spec.url,
        ssh=False,
        kind=spec.scheme,
        login=spec.url,
        local_version=local_version,
    )
    refused = spec_of.token_refusal(spec.name, spec.url)
    if refused is not None:  # not even a TCP connection: its token would follow
        return _with(found, unreachable=refused)
    port = spec.port or (443 if spec.scheme == "wss" else 80)
    started = time.monotonic()
    try:
        with trio.fail_after(reach_seconds):
            stream = await trio.open_tcp_stream(spec.host, port)
        await stream.aclose()
    except trio.TooSlowError:
        return _with(
            found,
            reach_seconds=time.monotonic() - started,
            unreachable=f"no answer from {spec.host}:{port} within {reach_seconds:g} s",
        )
    except OSError as exc:
        return _with(
            found,
            reach_seconds=time.monotonic() - started,
            unreachable=f"cannot reach {spec.host}:{port}: {_tcp_failure(exc)}",
        )
    found = _with(found, reach_seconds=time.monotonic() - started)
    assert spec.token_file is not None
    try:
        token = (await trio.Path(spec.token_file).read_text(encoding="utf-8")).strip()
    except OSError as exc:
        why = f"cannot read its token file {spec.token_file}: {exc.strerror or exc}"
        return _with(found, server=ExecServer(0.0, failure=why))
    if not token:
        why = f"its token file {spec.token_file} is empty"
        return _with(found, server=ExecServer(0.0, failure=why))
    begun = time.monotonic()
    try:
        with trio.fail_after(initialize_seconds):
            async with connect(
                spec.url,
                additional_headers={"Authorization": f"Bearer {token}"},
                max_size=MAX_MESSAGE,
                compression=None,
                proxy=websocket_proxy(spec.url),
            ) as ws:

                async def send(data: bytes) -> None:
                    await ws.send(data.rstrip(b"\n").decode())

                async def receive() -> bytes | None:
                    try:
                        message = await ws.recv()
                    except WebSocketException:
                        return None
                    return message.encode() if isinstance(message, str) else message

                async def ended() -> str:
                    return "the exec-server closed the connection"

                server = await _initialize(send, receive, initialize_seconds, ended)
    except trio.TooSlowError:
        server = ExecServer(
            time.monotonic() - begun,
            failure=f"no WebSocket handshake within {initialize_seconds:g} s",
        )
    except InvalidStatus as exc:
        code = exc.response.status_code
        why = (
            "the exec-server refused its token (HTTP 401)"
            if code == 401
            else f"the WebSocket handshake was refused (HTTP {code})"
        )
        server = ExecServer(time.monotonic() - begun, failure=why)
    except (InvalidHandshake, WebSocketException, OSError) as exc:
        server = ExecServer(
            time.monotonic() - begun, failure=f"the WebSocket handshake failed: {exc}"
        )
    return _with(found, server=server)


def _tcp_failure(exc: OSError) -> str:
    """The system's words: trio wraps each address's failure in one "all attempts" error."""
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        said = [
            os.strerror(e.errno) if e.errno else str(e)
            for e in cause.exceptions
            if isinstance(e, OSError)
        ]
        if said:
            return "; ".join(dict.fromkeys(said))
    return str(exc.strerror or exc)


async def _ran(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    """``argv`` run to its end, its output kept, nothing on its stdin."""
    return await trio.run_process(
        argv, stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True, check=False
    )


def _words(stderr: str) -> str:
    """ssh's verdict: the last lines it wrote (a changed host key's banner is many lines;
    its verdict is the last)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return "; ".join(lines[-3:])


def _with(found: MachineFound, **changes: Any) -> MachineFound:
    return replace(found, **changes)
