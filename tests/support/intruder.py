"""Another local user, who gets to the daemon's runtime directory first.

On a shared machine with ``$XDG_RUNTIME_DIR`` unset, the runtime directory is
``codex-acp-bridge-<uid>`` in the temporary directory, a name any local user can create
before the daemon does. :func:`squatted_runtime_dir` has :data:`USER` (a dedicated
unprivileged user, made once per machine with ``useradd`` under a file lock, as
:mod:`tests.support.sshd` makes its own) prepare it in a sticky, world-writable folder of
the test's own (as ``/tmp`` is), as a running daemon would leave it: a ``daemon.json`` of
its choosing, and ``daemon.lock`` held (``flock``). Its part runs as that user
(``runuser``), never as the test's.

The port it names is :class:`Listener`'s: whatever reaches it (a connection, a token) is
kept, so a test can say that nothing did.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.loopback import request_head, serve_loopback
from tests.support.processes import wait_or_kill

USER = "cab-intruder"
LOCK = Path("/tmp/codex-acp-bridge-tests-intruder-user.lock")

#: What the intruder runs (as itself): its directory, the victim's name for it, with a
#: daemon.json of its choosing and a page's token, then the lock held until its stdin closes.
PREPARE = """
set -e
umask 077
mkdir "$1"
printf '%s\\n' "$2" > "$1/daemon.json"
printf 'a-page-token-of-its-own\\n' > "$1/page-token"
exec flock -x "$1/daemon.lock" -c 'echo locked; exec cat > /dev/null'
"""


def intruder() -> pwd.struct_passwd:
    """The other user, made the first time (root only)."""
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.geteuid() != 0:
            pytest.fail(f"these tests act as a second local user, {USER!r}: run them as root")
        try:
            return pwd.getpwnam(USER)
        except KeyError:
            pass
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", USER], check=True)
        return pwd.getpwnam(USER)


@dataclass
class Listener:
    """A TCP port on loopback that keeps what each connection sends (its first bytes)."""

    port: int = 0
    heard: list[bytes] = field(default_factory=list)
    reached: trio.Event = field(default_factory=trio.Event)

    async def serve(self, nursery: trio.Nursery) -> None:
        self.port = await serve_loopback(nursery, self._keep)

    async def _keep(self, stream: trio.SocketStream) -> None:
        data = None
        async with stream:
            with trio.move_on_after(2):
                data = await request_head(stream)
        self.heard.append(data or b"")
        self.reached.set()

    async def never_reached(self) -> None:
        """Fail the test the moment anything connects."""
        await self.reached.wait()
        raise AssertionError(f"something connected to the port daemon.json names: {self.heard}")


@dataclass(frozen=True)
class Squat:
    """The runtime directory the victim's default names, prepared by :data:`USER`."""

    #: The sticky folder standing for ``/tmp`` (the victim's ``$TMPDIR``).
    tmp: Path
    #: ``codex-acp-bridge-<victim's uid>`` in it.
    directory: Path
    listener: Listener
    #: The secret in the file ``daemon.json``'s ``tokenFile`` names (the victim's alone).
    secret: str

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with the runtime directory left to its default: ``$TMPDIR``'s."""
        env = {
            k: v
            for k, v in env.items()
            if k not in ("CODEX_ACP_BRIDGE_RUNTIME_DIR", "XDG_RUNTIME_DIR")
        }
        return {**env, "TMPDIR": str(self.tmp)}


@contextlib.asynccontextmanager
async def squatted_runtime_dir(
    nursery: trio.Nursery, secret_file: Path, info: dict[str, Any]
) -> AsyncIterator[Squat]:
    """:data:`USER` prepares this user's default runtime directory: ``info`` (with the
    listener as its Codex and its page, and ``secret_file`` as ``tokenFile``) as its
    ``daemon.json``, the lock held, for the span of the ``async with``."""
    user = intruder()
    listener = Listener()
    await listener.serve(nursery)
    tmp = Path(tempfile.mkdtemp(prefix="cab-sticky-", dir="/tmp"))
    tmp.chmod(0o1777)
    directory = tmp / f"codex-acp-bridge-{os.getuid()}"
    said = {
        **info,
        "url": f"ws://127.0.0.1:{listener.port}",
        "tokenFile": str(secret_file),
        "pageUrl": f"http://127.0.0.1:{listener.port}/",
    }
    process = await trio.lowlevel.open_process(
        [
            "runuser",
            "-u",
            user.pw_name,
            "--",
            "sh",
            "-c",
            PREPARE,
            "sh",
            str(directory),
            json.dumps(said),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        with trio.fail_after(10):
            out = b""
            while b"locked\n" not in out:
                chunk = await process.stdout.receive_some()
                assert chunk, f"{USER} could not prepare {directory}: {out.decode()}"
                out += chunk
        assert directory.stat().st_uid == user.pw_uid
        yield Squat(tmp, directory, listener, secret_file.read_text().strip())
    finally:
        if process.stdin is not None:
            await process.stdin.aclose()
        await wait_or_kill(process, 5)
        shutil.rmtree(tmp)
