"""The daemon's runtime directory: where it is, who owns it, what it publishes.

One directory per user (``--runtime-dir``, else ``$CODEX_ACP_BRIDGE_RUNTIME_DIR``,
else ``$XDG_RUNTIME_DIR/codex-acp-bridge``, else ``codex-acp-bridge-<uid>`` in the
system's temporary directory), private to the user (0700, files 0600). In it:

- ``daemon.lock``: held (``flock``) by the running daemon for its whole life. The
  kernel releases it when the daemon dies, however it dies, so a directory left by
  a killed daemon is simply reused, and a second daemon is refused while the first
  lives;
- ``token``: the capability token of the daemon's Codex (``--ws-auth
  capability-token``);
- ``daemon.json``: where the daemon's Codex listens and what runs, rewritten
  (atomically) whenever that changes: :class:`DaemonInfo`;
- ``page-token``: the secret of the daemon's page (:mod:`bridge.daemon.page`), new at
  each start;
- ``status.json``: the live picture of every thread (:mod:`bridge.daemon.picture`),
  rewritten whenever a thread changes.

Clients (``serve``, ``status``) read ``daemon.json`` and trust it only while the
lock is held.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

ENV_RUNTIME_DIR = "CODEX_ACP_BRIDGE_RUNTIME_DIR"
LOCK = "daemon.lock"
INFO = "daemon.json"
TOKEN = "token"
PAGE_TOKEN = "page-token"
STATUS = "status.json"


class DaemonMachine(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A machine the daemon's links reach (:mod:`bridge.shell.machine_link`), as
    ``daemon.json`` says it: no token (Codex alone has it)."""

    name: str
    #: As the user wrote it (``ssh://me@devbox/src``): an editor's ``serve`` checks it with
    #: the same ssh before a prompt there.
    url: str
    description: str = ""
    path: str = ""
    #: ``idle`` | ``connecting`` | ``connected`` | ``down`` (``reason`` says why).
    state: str = "idle"
    reason: str = ""


class DaemonInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What ``daemon.json`` says."""

    pid: int
    bridgeVersion: str
    #: ``starting`` | ``running`` | ``restarting`` | ``failed`` (a crash loop; ``reason`` says why).
    state: str
    url: str = ""
    tokenFile: str = ""
    codexPid: int | None = None
    codexVersion: str = ""
    #: The Codex binary it runs (its real path) and the ``CODEX_HOME`` it serves (resolved):
    #: ``serve`` attaches only when they are what its editor asked for.
    codexBin: str = ""
    codexHome: str = ""
    startedAt: float = 0.0
    reason: str = ""
    #: Where the daemon's page is served (without its token: ``page-token`` holds it).
    pageUrl: str = ""
    #: The machines its Codex has registered, and the ssh command that reaches them.
    machines: list[DaemonMachine] = msgspec.field(default_factory=list)
    sshCommand: list[str] = msgspec.field(default_factory=list)
    #: The Codex config profile of the editors that attach and name none (``--profile``):
    #: each one's ``serve`` layers it over their threads (its Codex runs without one).
    profile: str = ""


class RuntimeDirError(Exception):
    """The runtime directory cannot be used; the message says why."""


def runtime_dir(explicit: str | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The runtime directory the options and environment name (not created)."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit)
    if env.get(ENV_RUNTIME_DIR):
        return Path(env[ENV_RUNTIME_DIR])
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "codex-acp-bridge"
    return Path(tempfile.gettempdir()) / f"codex-acp-bridge-{os.getuid()}"


def codex_home(env: Mapping[str, str] | None = None) -> str:
    """The ``CODEX_HOME`` a Codex started with ``env`` uses (``~/.codex`` when unset), resolved."""
    env = os.environ if env is None else env
    home = env.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")
    return os.path.realpath(home)


def prepare(directory: Path) -> Path:
    """Create ``directory`` private to this user, or check that it is."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = directory.stat()
    except OSError as exc:
        raise RuntimeDirError(f"cannot use runtime directory {directory}: {exc.strerror}") from exc
    if status.st_uid != os.getuid():
        raise RuntimeDirError(f"runtime directory {directory} belongs to another user")
    if status.st_mode & 0o077:
        os.chmod(directory, 0o700)
    return directory


@contextlib.contextmanager
def hold_lock(directory: Path) -> Iterator[None]:
    """Hold the daemon lock of ``directory``; refuse when another daemon holds it."""
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            other = read_info(directory)
            who = f" (pid {other.pid})" if other is not None else ""
            raise RuntimeDirError(f"a daemon already runs on {directory}{who}") from None
        yield
    finally:
        os.close(fd)


def daemon_running(directory: Path) -> bool:
    """Whether a daemon holds the lock of ``directory`` now."""
    try:
        fd = os.open(directory / LOCK, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def new_token(directory: Path) -> Path:
    """A fresh capability token in ``directory`` (0600); its path."""
    path = directory / TOKEN
    _write_private(path, secrets.token_urlsafe(32) + "\n")
    return path


def new_page_token(directory: Path) -> str:
    """A fresh secret for the daemon's page, kept in ``directory`` (0600)."""
    token = secrets.token_urlsafe(32)
    _write_private(directory / PAGE_TOKEN, token + "\n")
    return token


def page_address(directory: Path, info: DaemonInfo) -> str | None:
    """The page's URL with its token, as ``status --url`` prints it; ``None`` without a page."""
    if not info.pageUrl:
        return None
    try:
        token = (directory / PAGE_TOKEN).read_text().strip()
    except OSError:
        return None
    return f"{info.pageUrl}?token={token}"


def write_info(directory: Path, info: DaemonInfo) -> None:
    _write_private(directory / INFO, msgspec.json.encode(info).decode() + "\n")


def read_info(directory: Path) -> DaemonInfo | None:
    try:
        return msgspec.json.decode((directory / INFO).read_bytes(), type=DaemonInfo)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def running_daemon(directory: Path) -> DaemonInfo | None:
    """What the daemon of ``directory`` publishes, if one runs there now."""
    if not daemon_running(directory):
        return None
    return read_info(directory)


def remove_info(directory: Path) -> None:
    for name in (INFO, STATUS, PAGE_TOKEN):
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()


def write_status(directory: Path, threads: Sequence[Any]) -> None:
    _write_private(directory / STATUS, msgspec.json.encode({"threads": threads}).decode() + "\n")


def read_status(directory: Path) -> list[dict[str, Any]]:
    try:
        threads = msgspec.json.decode((directory / STATUS).read_bytes()).get("threads")
    except (OSError, msgspec.DecodeError, AttributeError):
        return []
    return threads if isinstance(threads, list) else []


def _write_private(path: Path, text: str) -> None:
    # Write beside, then rename: a reader sees the old file or the new one, whole.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
