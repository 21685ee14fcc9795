"""A real OpenSSH server on loopback, of a test's own, as the machine a session works on.

``ssh_machine(directory, codex_bin)`` starts Debian's ``sshd`` (``scripts/setup`` installs
``openssh-server``) on 127.0.0.1 and a free port, with a host key, a config and a pid file of
its own (never the system's sshd, nothing under ``/etc/ssh``), logging in by key as
:data:`USER`, a dedicated unprivileged user whose home holds each test's remote workspace:
a command's ``id -un`` and the owner of the files it writes prove where it ran. The client
side is a private ``ssh_config`` (alias :data:`HOST`, the key, a ``known_hosts`` with the
real host key, ``StrictHostKeyChecking yes``): ``ssh_command`` is what ``--ssh-command``
takes, as git's ``GIT_SSH_COMMAND``.

The user is made once per machine (``useradd``, under a file lock: pytest-xdist's workers
start at once); sshd refuses a locked account even for a key, so it gets the password
``*`` (no password matches it). The pinned Codex is copied where that user can run it and
put on the PATH of its sessions with sshd's ``SetEnv``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from bridge.shell.codex_process import codex_launch

SSHD = Path("/usr/sbin/sshd")
USER = "cab-remote"
HOST = "devbox"
LOCK = Path("/tmp/codex-acp-bridge-tests-sshd-user.lock")


def _ensure_user() -> pwd.struct_passwd:
    """The tests' remote user, made the first time (root only)."""
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return pwd.getpwnam(USER)
        except KeyError:
            pass
        if os.geteuid() != 0:
            pytest.fail(
                f"the machine tests log in over ssh as a user {USER!r} that does not exist; "
                "run them as root once (they create it), or `useradd -m {USER}`"
            )
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", USER], check=True)
        subprocess.run(["usermod", "-p", "*", USER], check=True)
        return pwd.getpwnam(USER)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )


@dataclass
class SshMachine:
    """One running sshd and what reaches it."""

    directory: Path
    port: int
    workspace: Path
    uid: int
    ssh_command: str
    wrong_host_key_command: str
    config: Path
    log: Path
    user: str = USER
    host: str = HOST
    _process: trio.Process | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """``ssh://devbox``: the alias the client config resolves (port, user, key)."""
        return f"ssh://{self.host}"

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        """``command`` on the machine, as its user (for a test's own checks and actions)."""
        return subprocess.run(
            [*self.ssh_command.split(), HOST, command],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )

    async def start(self) -> None:
        """Start sshd (again, on the same port and keys) and wait until it accepts."""
        with self.log.open("ab") as log:
            self._process = await trio.lowlevel.open_process(
                [str(SSHD), "-D", "-e", "-f", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        with trio.fail_after(15):
            while True:
                if self._process.poll() is not None:
                    raise AssertionError(f"sshd exited: {self.log.read_text()[-2000:]}")
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", self.port)
                except OSError:
                    await trio.sleep(0.02)
                    continue
                await stream.aclose()
                return

    async def stop(self, *, kill_sessions: bool = False) -> None:
        """Stop the listener; with ``kill_sessions``, also every session it forked (and so
        what runs in them), as a machine that goes down would."""
        process, self._process = self._process, None
        if process is None:
            return
        with trio.fail_after(10):
            if not kill_sessions:
                process.terminate()
                await process.wait()
                return
            # All at once, the listener with them: a session it forks while its tree is
            # read would outlive the machine's end, and end later, in the next sshd's time.
            for pid in await _frozen(process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            await process.wait()
        # What the sessions ran that outlived them, as the remote user, in this workspace.
        for pid in _working_in(self.uid, self.workspace):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def kill_exec_servers(self) -> list[int]:
        """Kill this machine's ``codex exec-server`` processes (its sessions' only: other
        tests' machines log in as the same user), as a crash would; their pids."""
        if self._process is None:
            return []
        killed = []
        for pid in _children(self._process.pid):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"exec-server" in argv:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
        return killed


async def _frozen(pid: int) -> list[int]:
    """``pid`` and its every descendant, stopped (SIGSTOP): none forks any more."""
    frozen: list[int] = []
    while fresh := [p for p in (pid, *_children(pid)) if p not in frozen]:
        for each in fresh:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGSTOP)
        frozen += fresh
        # A signal is delivered, not obeyed at once: the walk again once each obeyed (a
        # child forked meanwhile is in it then).
        while not all(_stopped(p) for p in fresh):  # noqa: ASYNC110 (no event says so)
            await trio.sleep(0.01)
    return frozen


def _stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # gone
    state = stat.rsplit(")", 1)[1].split()[0]
    return state in ("T", "t", "Z", "X")


def _working_in(uid: int, folder: Path) -> list[int]:
    """The processes of ``uid`` whose working directory is in ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            real = next(line for line in status.splitlines() if line.startswith("Uid:"))
            if int(real.split()[1]) != uid:
                continue
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd == folder or folder in cwd.parents:
            found.append(int(entry.name))
    return found


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (sshd's per-connection processes and theirs)."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            with contextlib.suppress(OSError):
                kids = [int(p) for p in (task / "children").read_text().split()]
                found += kids
                pending += kids
    return found


@asynccontextmanager
async def ssh_machine(
    directory: Path, codex_bin: str, *, with_codex: bool = True
) -> AsyncIterator[SshMachine]:
    """A running sshd on loopback (see the module docstring); ``with_codex=False``: its
    user's sessions find no ``codex``."""
    if not SSHD.exists() or shutil.which("ssh") is None:
        pytest.fail(
            "the machine tests need OpenSSH (sshd and ssh): run scripts/setup, which installs "
            "Debian's openssh-server"
        )
    account = _ensure_user()
    # sshd's privilege separation needs it; Debian's service makes it at boot, not the package.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    home = Path(account.pw_dir)
    unique = uuid.uuid4().hex[:12]
    workspace = home / "ws" / unique
    workspace.mkdir(parents=True)
    bin_dir = home / "bins" / unique
    bin_dir.mkdir(parents=True)
    cache = home / "caches" / unique
    if with_codex:
        native = codex_launch(codex_bin, os.environ).program
        shutil.copy2(native, bin_dir / "codex")
    (home / "caches").mkdir(exist_ok=True)
    for path in (home / "ws", workspace, home / "bins", bin_dir, *bin_dir.iterdir()):
        os.chown(path, account.pw_uid, account.pw_gid)
    os.chown(home / "caches", account.pw_uid, account.pw_gid)

    host_key, client_key, other_key = (directory / n for n in ("host_key", "id", "other_key"))
    for key in (host_key, client_key, other_key):
        _keygen(key)
    # sshd reads it as the user, who cannot enter the test's folder: it lives in their home.
    authorized = home / "keys" / unique
    authorized.parent.mkdir(exist_ok=True)
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    for path in (authorized.parent, authorized):
        os.chown(path, account.pw_uid, account.pw_gid)
    authorized.chmod(0o600)
    port = _free_port()
    config = directory / "sshd_config"
    # StrictModes no: the folders above the keys are not the user's alone (the key still
    # has to be the test's).
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"PidFile {directory / 'sshd.pid'}\nUsePAM no\nStrictModes no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"PubkeyAuthentication yes\nAuthorizedKeysFile {authorized}\nAllowUsers {USER}\n"
        # A cache folder of its own: a Codex the bridge brings (?codex=auto) is the test's.
        f"SetEnv PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin XDG_CACHE_HOME={cache}\n"
        "LogLevel VERBOSE\n"
    )
    public = host_key.with_suffix(".pub").read_text().split()
    other = other_key.with_suffix(".pub").read_text().split()
    commands = []
    for name, key in (("ssh_config", public), ("ssh_config_wrong", other)):
        known = directory / f"known_hosts_{name}"
        known.write_text(f"[127.0.0.1]:{port} {key[0]} {key[1]}\n")
        client = directory / name
        client.write_text(
            f"Host {HOST}\n  HostName 127.0.0.1\n  Port {port}\n  User {USER}\n"
            f"  IdentityFile {client_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n"
        )
        commands.append(f"ssh -F {client}")
    machine = SshMachine(
        directory=directory,
        port=port,
        workspace=workspace,
        uid=account.pw_uid,
        ssh_command=commands[0],
        wrong_host_key_command=commands[1],
        config=config,
        log=directory / "sshd.log",
    )
    await machine.start()
    try:
        yield machine
    finally:
        with trio.CancelScope(shield=True):
            await machine.stop(kill_sessions=True)
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.rmtree(bin_dir, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
        authorized.unlink(missing_ok=True)
