"""``codex-acp-bridge daemon``: one Codex app-server per user, supervised, that editors attach to.

The daemon starts ``codex app-server --listen ws://127.0.0.1:0`` with
capability-token authentication (the token in the runtime directory, private to
the user), reads the port Codex bound from its stderr, waits until it is ready,
and publishes where it listens in
``daemon.json`` (:mod:`bridge.daemon.runtime`). Each editor's ``serve`` attaches
to it, so the editor's process is a thin, disposable attachment: threads live
in Codex, which keeps running them when an editor goes away, and re-sends what
still waits on the user when another attaches and resumes them.

When Codex exits, the daemon starts it again with backoff (as ``serve`` does,
:class:`bridge.shell.restart.Restart`), perhaps on another port, and rewrites
``daemon.json``; attached ``serve`` processes re-read it when they reconnect. A
crash loop ends the daemon with exit status 1 and one line saying why; a runtime
directory that stops passing its check while the daemon runs
(:func:`bridge.daemon.runtime.check_dir`) ends it with exit status 2 and one line. SIGTERM
and SIGINT stop the daemon and its Codex, and remove ``daemon.json``.

With machines (``--machine``), the daemon runs their links
(:mod:`bridge.shell.machine_link`) and its watcher registers them with every Codex it
starts or joins; ``daemon.json`` names them and their links' states (no token), so an
editor's ``serve`` offers them, and ``status`` and the page show where each thread works.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import trio

from .. import __version__
from ..codex.versions import drift_warning
from ..redaction import command_line
from ..shell import codex_daemon
from ..shell.census import keep_census
from ..shell.codex_transport import (
    STDERR_TAIL,
    CodexUnavailable,
    codex_exit_words,
    codex_launch,
    strip_ansi,
)
from ..shell.restart import Backoff, Restart
from .observer import observe
from .page import PageOptions, open_page
from .page.board import Board
from .page.server import Hub, serve_page
from .picture import Picture
from .runtime import (
    DaemonInfo,
    DaemonMachine,
    RuntimeDirError,
    codex_home,
    new_token,
    remove_info,
    write_info,
    write_status,
)

if TYPE_CHECKING:
    from ..shell.machine_link import MachineLinks

log = logging.getLogger(__name__)
codex_log = logging.getLogger("codex")

#: How long a started Codex may take to answer ``/readyz``.
READY_SECONDS = 30.0


class CrashLoop(Exception):
    """Codex keeps dying; the message says how and why."""


async def run_daemon(
    directory: Path,
    codex_bin: str,
    *,
    config_overrides: Sequence[str] = (),
    restart: Restart | None = None,
    page: PageOptions | None = None,
    links: MachineLinks | None = None,
    profile: str = "",
) -> None:
    """Run until SIGTERM / SIGINT (returns) or a crash loop (raises :class:`CrashLoop`).

    ``page``: where the daemon's page listens (:mod:`bridge.daemon.page`); ``None``: no page.
    ``links``: the machines' links (bound already), run here and registered with Codex.
    ``profile``: the Codex config profile published for the editors that attach and name
    none (their ``serve`` layers it; Codex's app-server takes none).
    """
    restart = restart or Restart()
    token = new_token(directory)
    version = await _codex_version(codex_bin)
    warning = drift_warning(version)
    if warning is not None:
        log.warning("%s", warning)
    info = DaemonInfo(
        pid=os.getpid(),
        bridgeVersion=__version__,
        state="starting",
        tokenFile=str(token),
        codexVersion=version,
        codexBin=real_path(codex_bin),
        codexHome=codex_home(),
        startedAt=time.time(),
        profile=profile,
    )
    opened = await open_page(directory, page) if page is not None else None
    hub = Hub(Board(Picture()), lambda: msgspec.to_builtins(info)) if opened else None
    if opened is not None:
        info.pageUrl = opened.url
    watch = _Watch(links, hub)
    if links is not None:
        info.machines = [
            DaemonMachine(
                name=name,
                url=link.spec.url,
                kind=link.spec.scheme,
                where=link.spec.where(),
                description=link.spec.description,
                path=link.spec.path,
            )
            for name, link in links.links.items()
        ]
        info.sshCommand = list(links.ssh)

        def machine_changed(name: str, state: str, reason: str) -> None:
            for machine in info.machines:
                if machine.name == name:
                    machine.state, machine.reason = state, reason
            write_info(directory, info)
            watch.machines_changed(info)

        links.on_change = machine_changed
        watch.machines_changed(info)
    write_info(directory, info)
    # Raised once the nursery is closed: from inside, it would leave wrapped in an
    # exception group, which ``daemon`` would show as a traceback, not one line.
    crash: CrashLoop | RuntimeDirError | None = None
    try:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:

                async def on_signal() -> None:
                    async for signum in signals:
                        log.info("%s: stopping", signal.Signals(signum).name)
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(on_signal)
                nursery.start_soon(keep_census, hub.board.census if hub is not None else None)
                if links is not None:
                    await nursery.start(links.run)
                if opened is not None and hub is not None:
                    await nursery.start(
                        lambda task_status: serve_page(
                            hub,
                            opened.access,
                            opened.listeners,
                            ssl=opened.ssl,
                            task_status=task_status,
                        )
                    )
                socket = codex_daemon.socket_path(info.codexHome)
                if codex_daemon.answers(socket):
                    await _join(directory, socket, info, watch)
                    info.tokenFile, info.codexBin = str(token), real_path(codex_bin)
                    info.codexVersion = version
                    log.warning("Codex's daemon on %s is gone; running a Codex of its own", socket)
                try:
                    await _supervise(
                        directory, codex_bin, config_overrides, token, info, restart, watch
                    )
                except CrashLoop as exc:
                    crash = exc
                nursery.cancel_scope.cancel()
    except* RuntimeDirError as group:
        # The directory stopped passing its check while the daemon ran (its folder opened
        # to others, say): nothing more is written there, and the daemon stops saying why.
        crash = _first_leaf(group)
    finally:
        remove_info(directory)
    if crash is not None:
        raise crash


def _first_leaf(group: BaseExceptionGroup[RuntimeDirError]) -> RuntimeDirError:
    found: RuntimeDirError | BaseExceptionGroup[RuntimeDirError] = group
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return found


async def _supervise(
    directory: Path,
    codex_bin: str,
    config_overrides: Sequence[str],
    token: Path,
    info: DaemonInfo,
    restart: Restart,
    watch: _Watch,
) -> None:
    backoff = Backoff(restart)
    picture = watch.picture()

    def publish() -> None:
        write_status(directory, picture.lines())

    while True:
        ready = False
        try:
            server = _app_server(codex_bin, config_overrides, token)
            async with server.running() as (url, _process, pid):
                ready = True
                info.state, info.url, info.codexPid, info.reason = "running", url, pid, ""
                write_info(directory, info)
                log.info("Codex app-server %d listens on %s", pid, url)
                async with trio.open_nursery() as watching:
                    watching.start_soon(watch.observe, url, str(token), picture, publish)
                    reason = await server.exit_reason()
                    watching.cancel_scope.cancel()
        except CodexUnavailable as exc:
            reason = str(exc)
        picture.lost()
        publish()
        delay, why = backoff.lost(trio.current_time(), reason, was_ready=ready)
        if why is not None:
            info.state, info.url, info.codexPid, info.reason = "failed", "", None, why
            write_info(directory, info)
            raise CrashLoop(why)
        log.warning("%s; restarting in %.2g s", reason, delay)
        info.state, info.url, info.codexPid, info.reason = "restarting", "", None, reason
        write_info(directory, info)
        await trio.sleep(delay)


#: How long Codex's daemon may stay away (it restarts, updates itself) before the
#: bridge's daemon runs a Codex of its own instead.
JOIN_GRACE_SECONDS = 30.0


async def _join(directory: Path, socket: Path, info: DaemonInfo, watch: _Watch) -> None:
    """Use Codex's own daemon (``codex app-server daemon``) instead of a second app-server
    on the same ``CODEX_HOME``: publish its socket for ``serve``, and watch it (so
    ``status`` shows every thread of the user, the TUI's too) across its restarts.
    Returns once it has stayed away for :data:`JOIN_GRACE_SECONDS`."""
    picture = watch.picture()
    url = f"unix://{socket}"
    managed = socket.parents[1] / "packages" / "app-server-daemon" / "current" / "bin" / "codex"
    info.codexBin = real_path(str(managed)) if managed.exists() else ""
    info.codexVersion = codex_daemon.version(info.codexHome) or "version unknown"
    info.tokenFile = ""

    def publish() -> None:
        write_status(directory, picture.lines())

    while True:
        pid = codex_daemon.pid(info.codexHome)
        info.state, info.url, info.codexPid, info.reason = "running", url, pid, ""
        write_info(directory, info)
        log.info("using Codex's daemon on %s (pid %s)", socket, pid)
        await watch.observe(url, "", picture, publish)
        picture.lost()
        publish()
        # daemon.json keeps naming the socket: it stays where it is across Codex's restarts,
        # and editors reconnect to it as they would without this daemon.
        with trio.move_on_after(JOIN_GRACE_SECONDS):
            # A draining daemon may still accept a connection it closes at once: a pause
            # between attempts keeps this from spinning.
            await trio.sleep(0.25)
            while not codex_daemon.answers(socket):  # noqa: ASYNC110 (no event says it is back)
                await trio.sleep(0.1)
            continue
        return


class _Watch:
    """What each watch of a Codex shares: the page's hub, the machines to register, and
    where each thread works (the bridge's store of picks, read as it changes)."""

    def __init__(self, links: MachineLinks | None, hub: Hub | None) -> None:
        self.links = links
        self.hub = hub
        self._store = links.store if links is not None else None

    def picture(self) -> Picture:
        return Picture(self._store.cached if self._store is not None else None)

    async def observe(
        self, url: str, token_file: str, picture: Picture, publish: Callable[[], None]
    ) -> None:
        offers = self.links.offers() if self.links is not None else ()
        await observe(url, token_file, picture, publish, self.hub, machines=offers)

    def machines_changed(self, info: DaemonInfo) -> None:
        if self.hub is not None:
            self.hub.machines_changed(msgspec.to_builtins(info.machines))


#: Where Codex says it listens, on stderr once it has bound its port (0.169 and 0.171, after
#: "codex app-server (WebSockets)"; terminal colours stripped first).
_LISTENING = re.compile(r"\s*listening on: ws://127\.0\.0\.1:(\d+)\s*")


class _AppServer:
    """``codex app-server --listen`` (under :mod:`bridge.daemon.guard`): started, ready, and
    stopped with everything it started.

    Codex binds its own port (``--listen ws://127.0.0.1:0``) and says which on stderr
    (:data:`_LISTENING`): that port is Codex's from the moment it is named, so the token
    the daemon's watcher and the editors send there reaches Codex and nobody else. (A port
    the daemon found free and closed for Codex to bind would be free for anyone in between:
    another local user listening there first would answer ``/readyz`` and be sent the
    token.)"""

    def __init__(self, codex_bin: str, config_overrides: Sequence[str], token: Path) -> None:
        #: The port Codex said it listens on (``None`` until it said so).
        self.port: int | None = None
        # Under a guard that stops Codex when the daemon dies, however it dies.
        # npm's Node launcher, when codex_bin is one, is skipped for the binary it would run.
        launch = codex_launch(codex_bin, os.environ)
        self.env = launch.env
        self.argv = [sys.executable, "-m", "bridge.daemon.guard"]
        self.argv += [launch.program, "app-server", "--listen", "ws://127.0.0.1:0"]
        self.argv += ["--ws-auth", "capability-token", "--ws-token-file", str(token)]
        for override in config_overrides:
            self.argv += ["-c", override]
        self.process: trio.Process | None = None
        # Codex's last lines: why it exited is in them, before a backtrace.
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        self._stderr_done = trio.Event()
        self._listening = trio.Event()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[tuple[str, trio.Process, int]]:
        """Codex started and ready: its URL, the guard's process, and Codex's own pid (the
        guard's child). Stopped on the way out, with everything it started; its stderr is
        read until then, and no longer: what Codex started outside its group may hold the
        pipe open for ever."""
        log.info("starting %s", command_line(self.argv))
        try:
            # A session of its own: stopping the daemon's Codex stops what Codex started too
            # (its Node launcher runs Codex as a child).
            self.process = await trio.lowlevel.open_process(
                self.argv,
                stdin=subprocess.PIPE,  # never written: its end closing tells the guard
                stdout=subprocess.PIPE,  # Codex's pid, one line
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=self.env,
            )
        except OSError as exc:
            raise CodexUnavailable(f"cannot start Codex ({self.argv[3]}): {exc}") from exc
        # Raised once the nursery is closed: from inside, it would leave wrapped in an
        # exception group, which the supervisor would not take for a Codex that failed.
        refused: CodexUnavailable | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pump_stderr)
            try:
                try:
                    pid = await self._codex_pid()
                    port = await self._wait_listening()
                    await self._wait_ready(port)
                except CodexUnavailable as exc:
                    refused = exc
                else:
                    yield f"ws://127.0.0.1:{port}", self.process, pid
            finally:
                await self._stop()
                nursery.cancel_scope.cancel()
        if refused is not None:
            raise refused

    async def _codex_pid(self) -> int:
        """The pid the guard writes first: Codex's own, which the daemon publishes."""
        assert self.process is not None and self.process.stdout is not None
        data = b""
        with trio.move_on_after(READY_SECONDS):
            async for chunk in self.process.stdout:
                data += chunk
                if b"\n" in data:
                    break
        try:
            return int(data.split(b"\n")[0])
        except ValueError:
            raise CodexUnavailable(await self.exit_reason()) from None

    async def _stop(self) -> None:
        """Stop Codex's group: SIGTERM (the guard passes it on), then SIGKILL."""
        process = self.process
        assert process is not None
        with trio.CancelScope(shield=True):
            if process.poll() is None:
                _signal_group(process, signal.SIGTERM)
                with trio.move_on_after(3):
                    await process.wait()
            _signal_group(process, signal.SIGKILL)
            await process.wait()

    async def _wait_listening(self) -> int:
        """The port Codex says it bound (see :data:`_LISTENING`), once it says so."""
        assert self.process is not None
        with trio.move_on_after(READY_SECONDS):
            async with trio.open_nursery() as nursery:

                async def exited() -> None:
                    assert self.process is not None
                    await self.process.wait()
                    with trio.move_on_after(1):  # its last lines may name the port
                        await self._stderr_done.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(exited)
                await self._listening.wait()
                nursery.cancel_scope.cancel()
        if self.port is not None:
            return self.port
        if self.process.poll() is not None:
            raise CodexUnavailable(await self.exit_reason())
        raise CodexUnavailable(
            f"Codex app-server did not say where it listens within {READY_SECONDS:g} s "
            "(no 'listening on: ws://127.0.0.1:PORT' on its stderr)"
        )

    async def _wait_ready(self, port: int) -> None:
        assert self.process is not None
        with trio.move_on_after(READY_SECONDS) as scope:
            while self.process.poll() is None:
                if await app_server_ready(port):
                    return
                await trio.sleep(0.05)
        if scope.cancelled_caught:
            raise CodexUnavailable(f"Codex app-server was not ready after {READY_SECONDS:g} s")
        raise CodexUnavailable(await self.exit_reason())

    async def exit_reason(self) -> str:
        """Once Codex is exiting: its status and, when it said why, its words (a moment is
        given for them to arrive)."""
        assert self.process is not None
        await self.process.wait()
        with trio.move_on_after(1):
            await self._stderr_done.wait()
        why = f"Codex app-server exited with status {self.process.returncode}"
        words = codex_exit_words(self._stderr_tail)
        return f"{why}: {words}" if words else why

    async def _pump_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        buffer = b""
        try:
            async for chunk in self.process.stderr:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    text = strip_ansi(line.decode(errors="replace"))
                    self._stderr_tail.append(text)
                    codex_log.info("%s", text)
                    found = None if self.port is not None else _LISTENING.fullmatch(text)
                    if found is not None:  # its first word on it only
                        self.port = int(found.group(1))
                        self._listening.set()
        finally:
            self._stderr_done.set()


def _app_server(codex_bin: str, config_overrides: Sequence[str], token: Path) -> _AppServer:
    return _AppServer(codex_bin, config_overrides, token)


def real_path(path: str) -> str:
    return os.path.realpath(path)


def _signal_group(process: trio.Process, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


async def app_server_ready(port: int) -> bool:
    """Whether the ``codex app-server --listen`` on 127.0.0.1:``port`` answers ``/readyz``."""
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return False
    try:
        await stream.send_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return (await stream.receive_some(1024)).startswith(b"HTTP/1.1 200")
    except (trio.BrokenResourceError, OSError):
        return False
    finally:
        await stream.aclose()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now, and free for anyone until it is bound
    again: only for servers nothing secret is sent to (tests, benchmarks). Codex binds its
    own (see :class:`_AppServer`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _codex_version(codex_bin: str) -> str:
    # npm's launcher would start Node (~0.1 s of CPU) only to run the binary it names.
    launch = codex_launch(codex_bin, os.environ)
    try:
        done = await trio.run_process(
            [launch.program, "--version"],
            env=launch.env,
            capture_stdout=True,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    except OSError as exc:
        raise CodexUnavailable(f"cannot run Codex ({codex_bin}): {exc.strerror or exc}") from exc
    return done.stdout.decode(errors="replace").strip()
