"""Reaching Codex's app-server: spawn it on stdio, or attach over WebSocket.

Which binary, and starting its process, need no trio: :mod:`bridge.shell.codex_process`
(whose names are also importable from here)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

import trio

from ..token_urls import codex_url_refusal
from .codex_process import (
    ENV_CODEX_BIN,
    PINNED_CODEX,
    CodexLaunch,
    CodexProcess,
    CodexUnavailable,
    codex_exit_words,
    codex_launch,
    codex_version_of,
    find_codex,
    start_codex,
    strip_ansi,
    unix_socket_path,
)
from .streams import DEFAULT_MAX_MESSAGE, LineStream, MessageStream, MessageTooLarge
from .websocket import WebSocketStream, open_websocket

__all__ = [
    "ENV_CODEX_BIN",
    "PINNED_CODEX",
    "STDERR_TAIL",
    "CodexConnection",
    "CodexLaunch",
    "CodexProcess",
    "CodexUnavailable",
    "RunningCodex",
    "close_and_wait",
    "codex_exit_words",
    "codex_launch",
    "codex_url_refusal",
    "codex_version_of",
    "connect_codex",
    "find_codex",
    "spawn_codex",
    "start_codex",
    "strip_ansi",
    "unix_socket_path",
]

log = logging.getLogger(__name__)
codex_log = logging.getLogger("codex")

#: How many of Codex's last stderr lines are kept to say why it stopped: its error and a
#: backtrace of a stripped binary (~10 lines) fit many times over.
STDERR_TAIL = 200


class RunningCodex:
    """A started Codex (:class:`CodexProcess`) as the shell drives it: its pipes as trio
    streams, and a wait for its exit that does not block trio (a pidfd where the system has
    them, which is how trio waits for its own processes on Linux; else a thread)."""

    def __init__(self, started: CodexProcess) -> None:
        self._popen = started.popen
        self.pid = started.pid
        self.stdin = trio.lowlevel.FdStream(started.stdin)
        self.stdout = trio.lowlevel.FdStream(started.stdout)
        self.stderr = trio.lowlevel.FdStream(started.stderr)

    def poll(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        code = self._popen.poll()
        if code is not None:
            return code
        pidfd = None
        if hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                pidfd = os.pidfd_open(self.pid)
        if pidfd is None:
            return await trio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)
        try:
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
        return self._popen.wait()


@dataclass
class CodexConnection:
    """An open message stream to Codex, and how to tell why it ended."""

    stream: MessageStream
    #: Once the stream has ended: a sentence saying why, for the user.
    exit_reason: Callable[[], Awaitable[str]]
    #: Whether Codex waits while this connection is not read (a pipe does). Over a
    #: WebSocket Codex 0.169 drops a connection whose outbound queue is full instead
    #: ("disconnecting slow connection"), so that one must be read on, always.
    waits: bool = True


@asynccontextmanager
async def spawn_codex(
    binary: str,
    *,
    config_overrides: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    max_message: int = DEFAULT_MAX_MESSAGE,
    started: CodexProcess | None = None,
) -> AsyncIterator[CodexConnection]:
    """Run ``codex app-server`` on stdio; its stderr goes to the ``codex`` logger.

    ``started``: a Codex :func:`~bridge.shell.codex_process.start_codex` started before trio
    was running (``serve``'s early start), adopted instead of starting another."""
    if started is None:
        started = start_codex(binary, config_overrides=config_overrides, env=env)
    if started.argv[0] != binary:
        log.debug("%s is npm's launcher for Codex; running its native binary", binary)
    log.debug("Codex binary: %s", started.argv[0])
    log.debug("Codex app-server runs as pid %d", started.pid)
    process = RunningCodex(started)
    stderr_read = started.stderr_read
    stream = LineStream(
        process.stdout, process.stdin, max_message=max_message, received=started.stdout_read
    )
    # Codex's last lines: the reason it stopped is in them, before a backtrace.
    tail: deque[str] = deque(maxlen=STDERR_TAIL)
    stderr_done = trio.Event()

    async def describe_exit() -> str:
        # Give the process a moment to finish dying and its last words to arrive:
        # "exited with status 1" alone helps nobody.
        with trio.move_on_after(2):
            await process.wait()
            await stderr_done.wait()
        code = process.poll()
        why = f"exited with status {code}" if code is not None else "closed its output"
        words = codex_exit_words(tail)
        return f"Codex app-server {why}: {words}" if words else f"Codex app-server {why}"

    async def pump_stderr() -> None:
        assert process.stderr is not None
        lines = LineStream(process.stderr, None, max_message=1024 * 1024, received=stderr_read)
        try:
            while True:
                try:
                    line = (await lines.receive()).decode(errors="replace")
                except MessageTooLarge:  # an oversized log line is not worth dying for
                    continue
                line = strip_ansi(line)
                tail.append(line)
                codex_log.info("%s", line)
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # the pipe ended, as it does when Codex exits
        finally:
            stderr_done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_stderr)
        try:
            yield CodexConnection(stream, describe_exit)
        finally:
            with trio.CancelScope(shield=True):
                # Closing stdin asks app-server to exit; give it a moment, then insist,
                # politely and then not: the bridge exits within a second of its client.
                await close_and_wait(process, close=0.1, wait=0.3)
                _signal_group(process.pid, signal.SIGTERM)
                with trio.move_on_after(0.2):
                    await process.wait()
                _signal_group(process.pid, signal.SIGKILL)
                await process.wait()
            nursery.cancel_scope.cancel()


class StdioPeer(Protocol):
    """A process spoken to on its stdin (a :class:`trio.Process`, a :class:`RunningCodex`)."""

    @property
    def stdin(self) -> trio.abc.SendStream | None: ...

    async def wait(self) -> int: ...


async def close_and_wait(process: StdioPeer, *, close: float, wait: float) -> None:
    """Close a stdio peer's stdin, which asks it to exit, and wait for it to, each within
    its seconds; whether it did is ``process.poll()``."""
    assert process.stdin is not None
    with trio.move_on_after(close):
        await process.stdin.aclose()
    with trio.move_on_after(wait):
        await process.wait()


def _signal_group(group: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


@asynccontextmanager
async def connect_codex(
    url: str,
    *,
    token_file: str | None = None,
    token: str | None = None,
    max_message: int = DEFAULT_MAX_MESSAGE,
) -> AsyncIterator[CodexConnection]:
    """Attach to ``codex app-server --listen ws://...`` over WebSocket, or, for
    ``unix:///path``, over a Unix socket (Codex's own daemon: ``codex app-server
    daemon``, whose socket takes no token). Its capability token: read from
    ``token_file``, or ``token`` itself (the daemon's, read by :mod:`bridge.serve`); it
    goes only over ``wss://`` or to a loopback ``ws://`` (:func:`codex_url_refusal`,
    checked before anything is sent)."""
    from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

    headers = {}
    if token or token_file:
        refused = codex_url_refusal(url)
        if refused is not None:  # before the token is read, let alone sent
            raise CodexUnavailable(refused)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif token_file:
        try:
            token = (await trio.Path(token_file).read_text()).strip()
        except OSError as exc:
            raise CodexUnavailable(
                f"cannot read --codex-token-file {token_file}: {exc.strerror}"
            ) from exc
        headers["Authorization"] = f"Bearer {token}"
    socket_path = unix_socket_path(url)
    unix_socket = None
    if socket_path is not None:
        # The HTTP request of the handshake still needs a URI; the socket decides where.
        # Codex's daemon socket is a link to a short path: a socket's path has at most
        # ~107 bytes, which a deep CODEX_HOME exceeds.
        unix_socket = str(await trio.Path(socket_path).resolve())
    async with AsyncExitStack() as stack:
        try:
            ws = await stack.enter_async_context(
                open_websocket(
                    "ws://localhost/" if unix_socket is not None else url,
                    unix_socket=unix_socket,
                    headers=headers,
                    max_size=max_message,
                )
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            hint = " (check --codex-token-file)" if status in (401, 403) else ""
            raise CodexUnavailable(
                f"Codex at {url} refused the connection: HTTP {status}{hint}"
            ) from exc
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as exc:
            raise CodexUnavailable(f"cannot connect to Codex at {url}: {exc}") from exc

        async def describe_exit() -> str:
            reason = ws.protocol.close_reason or ""
            return f"WebSocket connection to Codex at {url} closed{': ' + reason if reason else ''}"

        yield CodexConnection(WebSocketStream(ws), describe_exit, waits=False)
