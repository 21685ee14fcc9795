"""Codex's own daemon (``codex app-server daemon``) in a test's ``CODEX_HOME``.

It runs detached from whoever started it (a session of its own), with an updater
(``codex app-server daemon pid-update-loop``) that ``stop`` leaves running: the
helper stops the daemon and then ends every process of that ``CODEX_HOME`` left,
and checks none is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import trio

from bridge.shell.codex_daemon import socket_path as codex_daemon_socket

#: How long ``start``, ``restart`` or ``stop`` may take.
COMMAND_SECONDS = 30


@dataclass
class CodexDaemon:
    home: Path
    codex_bin: str
    env: dict[str, str]
    #: What ``start`` printed (``socketPath``, ``pid``, versions).
    started: dict[str, object]

    @property
    def socket(self) -> Path:
        return codex_daemon_socket(str(self.home))

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    async def command(self, *words: str) -> dict[str, object]:
        """``codex app-server daemon WORDS``: its one JSON line."""
        with trio.fail_after(COMMAND_SECONDS):
            done = await trio.run_process(
                [self.codex_bin, "app-server", "daemon", *words],
                env=self.env,
                capture_stdout=True,
                stderr=subprocess.DEVNULL,
            )
        answer: dict[str, object] = msgspec.json.decode(done.stdout.strip().splitlines()[-1])
        return answer

    def processes(self) -> list[int]:
        return codex_home_processes(self.home)


def codex_home_processes(home: Path) -> list[int]:
    """Every live process run from (or with) ``home`` as ``CODEX_HOME``: the daemon, its
    updater, their children."""
    marker = f"CODEX_HOME={home}".encode()
    managed = str(home).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            if b"codex" in cmdline and (
                marker in environ.split(b"\0") or cmdline.startswith(managed)
            ):
                found.append(int(entry.name))
    return found


@asynccontextmanager
async def codex_daemon(
    home: Path, codex_bin: str, env: dict[str, str]
) -> AsyncIterator[CodexDaemon]:
    """Codex's daemon on ``home`` (``env`` names it as ``CODEX_HOME``), started; at the
    end stopped, and every process of ``home`` gone (its updater ended too)."""
    daemon = CodexDaemon(home, codex_bin, env, {})
    try:
        daemon.started = await daemon.command("start")
        yield daemon
    finally:
        with trio.CancelScope(shield=True):
            with contextlib.suppress(Exception):
                await daemon.command("stop")
            await end_processes(home)


async def end_processes(home: Path) -> None:
    """End every process of ``home`` (SIGTERM, then SIGKILL) and wait until none is left."""
    with trio.fail_after(10):
        for signum in (signal.SIGTERM, signal.SIGKILL):
            for pid in codex_home_processes(home):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
            with trio.move_on_after(3):
                while codex_home_processes(home):  # noqa: ASYNC110 (polls /proc)
                    await trio.sleep(0.05)
        assert not codex_home_processes(home), "a process of Codex's daemon survived"


@asynccontextmanager
async def codex_client(url: str) -> AsyncIterator[Callable[[str, object], Awaitable[Any]]]:
    """A connection of its own to the Codex at ``url`` (as Codex's TUI has one), initialized;
    yields ``call(method, params)``, which returns the result (an error fails the test)."""
    from bridge.shell.codex_transport import connect_codex

    async with connect_codex(url) as connection:
        stream = connection.stream
        ids = iter(range(1_000_000))

        async def call(method: str, params: object) -> Any:
            rid = next(ids)
            await stream.send(msgspec.json.encode({"id": rid, "method": method, "params": params}))
            while True:
                message = msgspec.json.decode(await stream.receive())
                if message.get("id") == rid and "method" not in message:
                    assert "result" in message, message
                    return message["result"]

        await call("initialize", {"clientInfo": {"name": "test", "version": "1"}})
        await stream.send(b'{"method": "initialized"}')
        yield call


async def codex_requests(url: str, *calls: tuple[str, object]) -> list[Any]:
    """Each ``(method, params)`` asked in turn on a connection of its own; their results."""
    async with codex_client(url) as call:
        return [await call(method, params) for method, params in calls]
