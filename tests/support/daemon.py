"""``codex-acp-bridge daemon`` run by a test, for ``serve`` to attach to."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import trio

from bridge.daemon.runtime import DaemonInfo, read_info

from .processes import wait_or_kill

#: What ``serve`` says (on stderr) when it attaches to the daemon's Codex.
ATTACHED = "Codex: the daemon's"


async def daemon_info(
    directory: Path, *, state: str = "running", old: int | None = None
) -> DaemonInfo:
    """What the daemon publishes, once it is in ``state`` (with a Codex other than ``old``)."""
    while True:
        info = read_info(directory)
        if info is not None and info.state == state and (old is None or info.codexPid != old):
            return info
        await trio.sleep(0.05)


@asynccontextmanager
async def running_daemon(
    env: dict[str, str], directory: Path, log: Path, *extra: str
) -> AsyncIterator[tuple[trio.Process, DaemonInfo]]:
    """The daemon on ``directory`` with ``env`` (its ``CODEX_HOME``, its Codex), once its
    Codex runs; stopped (SIGTERM) at the end. ``extra``: more ``daemon`` options."""
    argv = [sys.executable, "-m", "bridge", "daemon", "--runtime-dir", str(directory)]
    argv += ["--log-level", "info", *extra]
    with log.open("ab") as out:
        process = await trio.lowlevel.open_process(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
    try:
        with trio.fail_after(30):
            info = await daemon_info(directory)
        yield process, info
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            await wait_or_kill(process, 10)


#: The ``start_daemon`` fixture: ``async with start_daemon(*options) as (process, info)``.
StartDaemon = Callable[..., AbstractAsyncContextManager[tuple[trio.Process, DaemonInfo]]]


def serve_argv(directory: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bridge",
        "serve",
        "--runtime-dir",
        str(directory),
        "--log-level",
        "info",
    ]


async def daemon_refused(env: dict[str, str], runtime: Path) -> str:
    """``daemon --runtime-dir RUNTIME`` that refuses to start (exit 1): what it said."""
    refused = await trio.run_process(
        [sys.executable, "-m", "bridge", "daemon", "--runtime-dir", str(runtime)],
        env=env,
        capture_stderr=True,
        check=False,
    )
    assert refused.returncode == 1, refused.stderr.decode()
    return refused.stderr.decode().strip()
