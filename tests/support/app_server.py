"""A real ``codex app-server`` listening on a WebSocket, of a test's own, and a way to crash it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from bridge.daemon.daemon import app_server_ready, free_port
from bridge.shell.codex_transport import codex_launch


@asynccontextmanager
async def app_server(
    codex_bin: str, codex_home: Path, tmp_path: Path, *, port: int | None = None
) -> AsyncIterator[tuple[str, Path, trio.Process]]:
    """A real ``codex app-server --listen ws://127.0.0.1:PORT`` of the test's own (on
    ``port``, or a free one); yields its URL, its token file and its process."""
    token = tmp_path / "token"
    token.write_text("capability-token-for-subagent-tests-0123456789\n")
    if port is None:
        port = free_port()
    env = {**os.environ, "CODEX_HOME": str(codex_home)}
    env.pop("OPENAI_API_KEY", None)
    # The native binary npm's launcher would run, as the bridge runs it: not a Node first
    # (~70 ms of CPU to start, and before Node 22.15 the launcher stays, Codex its child).
    launch = codex_launch(codex_bin, env)
    with (tmp_path / "app-server.log").open("ab") as log:
        argv = [launch.program, "app-server", "--listen", f"ws://127.0.0.1:{port}"]
        argv += ["--ws-auth", "capability-token", "--ws-token-file", str(token)]
        process = await trio.lowlevel.open_process(
            argv, env=launch.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        try:
            with trio.fail_after(30):
                while not await app_server_ready(port):  # noqa: ASYNC110 (HTTP: poll)
                    await trio.sleep(0.05)
            yield f"ws://127.0.0.1:{port}", token, process
        finally:
            if process.poll() is None:
                crash(process)
            await process.wait()


def crash(process: trio.Process) -> None:
    """Kill the app-server this test started, at once. Where it runs under Codex's Node
    launcher (a binary :func:`codex_launch` does not recognise), Codex is the launcher's
    child (a SIGTERM would let Codex finish its turns first), so Codex itself (the child
    running ``app-server``) is killed by pid, then the launcher. Only those two: a shell
    Codex runs (its login-shell snapshot, a command) is left to finish, since killing one
    midway can leave a lock behind (pyenv's rehash lock did, blocking every login shell)."""
    codex: list[int] = []
    for task in Path(f"/proc/{process.pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for pid in (task / "children").read_text().split():
                with contextlib.suppress(OSError):
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    if b"app-server" in argv:
                        codex.append(int(pid))
    for pid in codex:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if process.poll() is None:
        process.kill()
