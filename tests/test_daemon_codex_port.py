"""The daemon's Codex binds its own port and says which (``bridge/daemon/daemon.py``'s
``_AppServer``): the URL the daemon publishes, and sends its token to, is that port. A port
the daemon picked and closed for Codex to bind would be anyone's in between: here another
listener takes it first (as another local user could), answers ``/readyz``, and must hear
nothing. A stand-in Codex (a few lines of Python) says where it listens as Codex 0.169 and
0.171 do; the real one runs in ``tests/test_e2e_daemon.py``."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest
import trio

from bridge.daemon import daemon
from bridge.shell.codex_transport import CodexUnavailable, connect_codex
from tests.support.loopback import serve_loopback, token_file

#: What the stand-in does with ``app-server --listen ws://127.0.0.1:PORT``: a moment to start
#: (Codex takes one: the window a port picked before it is anyone's), its port bound (the
#: one asked for, 0: its own), the words Codex says (with colours, as in a terminal), then
#: ``/readyz`` answered and any other request kept in ``heard``.
STAND_IN = """#!{python}
import pathlib, socket, sys, time
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("codex-cli 0.171.0")
    sys.exit(0)
if {silent}:
    time.sleep(60)
if {orphan_file!r}:
    # Something Codex started that left its process group (its own session) and kept
    # Codex's stderr: stopping Codex's group does not end it, nor close that pipe.
    import subprocess
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    child = subprocess.Popen(sleeper, start_new_session=True, stdout=subprocess.DEVNULL)
    pathlib.Path({orphan_file!r}).write_text(str(child.pid))
port = int(args[args.index("--listen") + 1].rsplit(":", 1)[1])
time.sleep(0.3)
server = socket.socket()
server.bind(("127.0.0.1", port))
server.listen()
bound = server.getsockname()[1]
pathlib.Path({bound_file!r}).write_text(str(bound))
print("\\x1b[2m2026-12-05T05:54:28Z\\x1b[0m \\x1b[31mERROR\\x1b[0m a warning first", file=sys.stderr)
print("codex app-server (WebSockets)", file=sys.stderr)
print(f"  listening on: \\x1b[32mws://127.0.0.1:{{bound}}\\x1b[0m", file=sys.stderr)
print(f"  readyz: http://127.0.0.1:{{bound}}/readyz", file=sys.stderr, flush=True)
heard = pathlib.Path({heard_file!r})
while True:
    connection, _ = server.accept()
    data = connection.recv(65536)
    if data.startswith(b"GET /readyz"):
        connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n")
    else:
        heard.write_bytes((heard.read_bytes() if heard.exists() else b"") + data)
    connection.close()
"""


def stand_in(
    tmp_path: Path, *, silent: bool = False, orphan: Path | None = None
) -> tuple[Path, Path, Path]:
    """The stand-in Codex, the file it writes the port it bound to, and the one holding what
    it heard. ``orphan``: where it writes the pid of a process it leaves behind."""
    codex, bound, heard = tmp_path / "codex", tmp_path / "bound", tmp_path / "heard"
    codex.write_text(
        STAND_IN.format(
            python=sys.executable,
            silent=silent,
            bound_file=str(bound),
            heard_file=str(heard),
            orphan_file=str(orphan or ""),
        )
    )
    codex.chmod(0o755)
    return codex, bound, heard


class Squatter:
    """A listener on 127.0.0.1 that is not Codex: ready by ``/readyz``, keeping the rest."""

    def __init__(self) -> None:
        self.port = 0
        self.heard = b""

    async def serve(self, nursery: trio.Nursery) -> None:
        self.port = await serve_loopback(nursery, self._answer)

    async def _answer(self, stream: trio.SocketStream) -> None:
        async with stream:
            data = await stream.receive_some(65536)
            if data.startswith(b"GET /readyz"):
                await stream.send_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            else:
                self.heard += data


@pytest.fixture
def token(tmp_path: Path) -> Path:
    return token_file(tmp_path, "the-daemons-capability-token")


async def test_the_url_is_the_port_codex_bound_and_a_port_taken_first_hears_no_token(
    tmp_path: Path, token: Path, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    squatter = Squatter()
    await squatter.serve(nursery)
    # Someone took the port a free-port probe would have found, before Codex could bind it.
    monkeypatch.setattr(daemon, "free_port", lambda: squatter.port)
    codex, bound, heard = stand_in(tmp_path)
    with trio.fail_after(20):
        async with daemon._AppServer(str(codex), [], token).running() as (url, _process, _pid):
            # What the daemon's watcher, then every editor, does with the URL.
            with contextlib.suppress(CodexUnavailable):
                async with connect_codex(url, token_file=str(token)):
                    pass
    assert b"the-daemons-capability-token" not in squatter.heard, "the token went elsewhere"
    assert url == f"ws://127.0.0.1:{bound.read_text()}"
    assert b"Authorization: Bearer the-daemons-capability-token" in heard.read_bytes()


async def test_a_stopped_codex_is_left_even_when_something_it_started_keeps_its_stderr(
    tmp_path: Path, token: Path
) -> None:
    """Once Codex's process group is stopped, its stderr is no longer read: a process of
    Codex's own session holding the pipe open must not keep the daemon waiting on it (a
    daemon that could neither restart Codex nor stop)."""
    orphan = tmp_path / "orphan"
    codex, _bound, _heard = stand_in(tmp_path, orphan=orphan)
    try:
        with trio.fail_after(20):
            async with daemon._AppServer(str(codex), [], token).running():
                pass
    finally:
        if orphan.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(orphan.read_text()), signal.SIGKILL)


async def test_a_codex_that_exits_before_saying_where_it_listens_is_its_own_words(
    tmp_path: Path, token: Path
) -> None:
    codex = tmp_path / "codex"
    codex.write_text("#!/bin/sh\necho 'codex: config is unreadable' >&2\nexit 3\n")
    codex.chmod(0o755)
    await _refused(codex, token, "exited with status 3: codex: config is unreadable")


async def test_a_codex_that_never_says_where_it_listens_is_given_up_on_saying_so(
    tmp_path: Path, token: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daemon, "READY_SECONDS", 1.0)
    codex, _bound, _heard = stand_in(tmp_path, silent=True)
    await _refused(codex, token, "did not say where it listens within 1 s")


async def _refused(codex: Path, token: Path, words: str) -> None:
    server = daemon._AppServer(str(codex), [], token)
    with trio.fail_after(20), pytest.raises(CodexUnavailable) as refused:
        async with server.running():
            pass
    assert words in str(refused.value)
    assert server.process is not None and server.process.poll() is not None, "stopped"
