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
  each start (a tab that kept the last one's is refused);
- ``status.json``: the live picture of every thread (:mod:`bridge.daemon.picture`),
  rewritten whenever a thread changes;
- ``open-page.html``: written by ``status --open`` for the browser, which it sends to the
  page with its secret (a browser's command line is readable by every local user; this
  file is not).

Clients (``serve``, ``status``) read ``daemon.json`` and trust it only while the
lock is held.

Nobody else's: the default name in a shared temporary directory is one any local user
can create first, with a ``daemon.json`` of theirs in it. So every reader (``serve``,
``status``, ``doctor``) and the daemon itself first check the directory
(:func:`check_dir`): a real directory (not a symbolic link), this user's, with no
permission bit for group or others, in a folder no other user could replace it in (one of
this user's or root's, and writable by others only with the sticky bit, as ``/tmp`` is);
each file is opened without following a symbolic link and used only when it is a regular
file of this user's, private to them, with no other name (a hard link). Anything else is a
:class:`RuntimeDirError` whose message says what is wrong and how to put it right.

Each use of the directory opens it once, checks what it opened, and reaches its files only
through that descriptor (``openat``, ``renameat``, ``unlinkat``): what is read or written
is in the directory checked, even when its name has since been given to another. The token
sent to the daemon's Codex is read only as ``token`` in the checked directory, and nothing
``daemon.json`` names is ever run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import ipaddress
import json
import os
import pwd
import re
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec

ENV_RUNTIME_DIR = "CODEX_ACP_BRIDGE_RUNTIME_DIR"
LOCK = "daemon.lock"
INFO = "daemon.json"
TOKEN = "token"
PAGE_TOKEN = "page-token"
PAGE_OPENER = "open-page.html"
STATUS = "status.json"


class DaemonMachine(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A machine the daemon's links reach (:mod:`bridge.shell.machine_link`), as
    ``daemon.json`` says it: no token (Codex alone has it)."""

    name: str
    #: As the user wrote it (``ssh://me@devbox/src``): an editor's ``serve`` checks it with
    #: the same ssh before a prompt there.
    url: str
    #: Its kind: ``ssh``, ``podman``, ``docker``, ``devcontainer``, ``command``, ``ws`` or ``wss``
    #: (:attr:`bridge.machines.MachineSpec.scheme`); ``""`` in an older ``daemon.json``.
    kind: str = ""
    #: Where it is, as a person reads it: ``me@devbox``, ``podman container devbox``
    #: (:meth:`bridge.machines.MachineSpec.where`).
    where: str = ""
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
    """The runtime directory, or a file in it, cannot be trusted or used: ``what`` is wrong,
    ``fix`` says how to put it right; the message is both, on one line."""

    def __init__(self, what: str, fix: str = "") -> None:
        super().__init__(f"{what}; {fix}" if fix else what)
        self.what = what
        self.fix = fix


class DaemonRuns(RuntimeDirError):
    """Another daemon holds the directory's lock."""


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


#: The way out when the directory is not one to use: another one.
ANOTHER = f"use another runtime directory (--runtime-dir, ${ENV_RUNTIME_DIR}, or $XDG_RUNTIME_DIR)"
#: A file of the directory found wrong: the daemon writes each anew when it starts.
RENEW = "remove it and restart the daemon"
#: How every file of the directory is opened: never through a symbolic link, never waiting
#: (a FIFO would block its opener), never inherited by a child.
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def check_dir(directory: Path) -> bool:
    """Whether ``directory`` exists; :class:`RuntimeDirError` when it does but is not a
    real directory (a symbolic link is not) of this user's with no permission bit for group
    or others, or when its folder is one another user could replace it in (it need not
    exist then). What every reader of the directory, and the daemon, checks first."""
    fd = _open_dir(directory)
    if fd is None:
        return False
    os.close(fd)
    return True


def prepare(directory: Path) -> Path:
    """Create ``directory`` private to this user (``mkdir`` 0700, which never follows a
    symbolic link, in its folder once that is checked; missing folders above it are made
    0755 at most), or check one that exists as every reader does (:func:`check_dir`). One
    open to others is refused, not made private: what others put in it would stay."""
    try:
        _make_folders(Path(os.path.abspath(directory)).parent)
    except OSError as exc:
        what = f"cannot create runtime directory {directory}: {exc.strerror}"
        raise RuntimeDirError(what, ANOTHER) from None
    fd = _open_dir(directory, create=True)
    if fd is None:  # its folder went away meanwhile
        what = f"cannot create runtime directory {directory}: its folder is gone"
        raise RuntimeDirError(what, ANOTHER)
    os.close(fd)
    return directory


def _make_folders(folder: Path) -> None:
    if os.path.lexists(folder) or folder.parent == folder:
        return
    _make_folders(folder.parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o755)  # never writable by others, whatever the umask


@contextlib.contextmanager
def hold_lock(directory: Path) -> Iterator[None]:
    """Hold the daemon lock of ``directory``; refuse when another daemon holds it."""
    with _checked_dir(directory) as dir_fd:
        fd = _open_file(directory, dir_fd, LOCK, os.O_RDWR | os.O_CREAT)
    if fd is None:
        raise _gone(directory)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            other = read_info(directory)
            who = f" (pid {other.pid})" if other is not None else ""
            raise DaemonRuns(f"a daemon already runs on {directory}{who}") from None
        yield
    finally:
        os.close(fd)


def daemon_running(directory: Path) -> bool:
    """Whether a daemon holds the lock of ``directory`` now (:class:`RuntimeDirError` when
    the directory or its lock cannot be trusted)."""
    with _checked_dir(directory) as dir_fd:
        return _lock_held(directory, dir_fd)


def _lock_held(directory: Path, dir_fd: int | None) -> bool:
    fd = _open_file(directory, dir_fd, LOCK, os.O_RDWR)
    if fd is None:
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
    _write_private(directory, TOKEN, _token() + "\n")
    return directory / TOKEN


def read_token(directory: Path) -> str:
    """The capability token of the daemon's Codex: ``token`` in the checked ``directory``,
    wherever ``daemon.json``'s ``tokenFile`` points."""
    data = _read(directory, TOKEN)
    token = data.decode(errors="replace").strip() if data is not None else ""
    if not token:
        raise RuntimeDirError(f"no token in {directory / TOKEN}", "restart the daemon")
    return token


def new_page_token(directory: Path) -> str:
    """A fresh secret for the daemon's page, kept in ``directory`` (0600)."""
    token = _token()
    _write_private(directory, PAGE_TOKEN, token + "\n")
    return token


def page_address(directory: Path, info: DaemonInfo, *, notify: bool = False) -> str | None:
    """The page's URL with its token, as ``status --url`` prints it; ``None`` without a page.
    The token is in the fragment (``#token=…``, then ``&notify`` with ``notify``), which a
    browser sends to no server: the page's script takes it from there. Only an address the
    daemon's page can have (:func:`page_url_ok`) gets the token."""
    if not info.pageUrl:
        return None
    if not page_url_ok(info.pageUrl):
        raise RuntimeDirError(
            f"{directory / INFO} names the page {info.pageUrl!r}, not an address the daemon's "
            "page has (http://127.0.0.1:PORT/, or https:// with --page-tls-cert)",
            RENEW,
        )
    data = _read(directory, PAGE_TOKEN)
    token = data.decode(errors="replace").strip() if data is not None else ""
    if not token:
        return None
    return f"{info.pageUrl}#token={token}" + ("&notify" if notify else "")


def write_page_opener(directory: Path, address: str) -> Path:
    """A page in ``directory`` (0600) that sends the browser to ``address`` (the page's URL,
    its secret in the fragment): what ``status --open`` hands the browser, so that the secret is in no
    process's command line. Written beside and renamed over, so it follows no link."""
    if urlsplit(address).scheme not in ("http", "https"):
        raise RuntimeDirError(f"the daemon's page is at {address!r}, not an http(s) URL")
    from html import escape  # only `status --open` writes this page

    attribute, script = escape(address), json.dumps(address).replace("<", "\\u003c")
    _write_private(
        directory,
        PAGE_OPENER,
        "<!doctype html>\n"
        '<meta charset="utf-8"><meta name="referrer" content="no-referrer">\n'
        f'<meta http-equiv="refresh" content="0; url={attribute}">\n'
        "<title>Codex agents</title>\n"
        # Replaced rather than followed: Back does not come here again.
        f"<script>location.replace({script})</script>\n"
        f'<p><a href="{attribute}">The daemon\'s page</a></p>\n',
    )
    return directory / PAGE_OPENER


def page_url_ok(url: str) -> bool:
    """Whether ``url`` is one :func:`bridge.daemon.page.open_page` writes: ``http://`` on a
    loopback address (``127.0.0.1``, ``[::1]``), or ``https://`` (the page served with TLS)
    on an address or a host name; a port, the path ``/``, nothing else (no user, query,
    fragment, space or option-like text a browser's command line would take)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or port is None or not 0 < port < 65536:
        return False
    name = f"[{host}]" if ":" in host else host
    if url != f"{parts.scheme}://{name}:{port}/":
        return False  # a user, a query, a fragment, another path, another spelling
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
        address = True
    except ValueError:
        address = False
    if parts.scheme != "https":
        return False
    return address or all(label and _LABEL.fullmatch(label) for label in host.split("."))


_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def write_info(directory: Path, info: DaemonInfo) -> None:
    _write_private(directory, INFO, msgspec.json.encode(info).decode() + "\n")


def read_info(directory: Path) -> DaemonInfo | None:
    """What ``daemon.json`` says (``None``: there is none, or it is no :class:`DaemonInfo`);
    :class:`RuntimeDirError` when it, or its directory, cannot be trusted."""
    return _decode_info(_read(directory, INFO))


def _decode_info(data: bytes | None) -> DaemonInfo | None:
    if data is None:
        return None
    try:
        return msgspec.json.decode(data, type=DaemonInfo)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def running_daemon(directory: Path) -> DaemonInfo | None:
    """What the daemon of ``directory`` publishes, if one runs there now
    (:class:`RuntimeDirError` when the directory cannot be trusted): the lock and
    ``daemon.json`` of one directory, opened once."""
    with _checked_dir(directory) as dir_fd:
        if not _lock_held(directory, dir_fd):
            return None
        return _decode_info(_read_in(directory, dir_fd, INFO))


def remove_info(directory: Path) -> None:
    """Remove what the daemon published. In a directory no longer this user's alone
    (:func:`check_dir` refuses it) nothing is removed: nothing there is the daemon's."""
    with contextlib.suppress(RuntimeDirError), _checked_dir(directory) as dir_fd:
        for name in (INFO, STATUS, PAGE_TOKEN, PAGE_OPENER):
            if dir_fd is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dir_fd)


def write_status(directory: Path, threads: Sequence[Any]) -> None:
    _write_private(directory, STATUS, msgspec.json.encode({"threads": threads}).decode() + "\n")


def read_status(directory: Path) -> list[dict[str, Any]]:
    data = _read(directory, STATUS)
    try:
        threads = msgspec.json.decode(data).get("threads") if data is not None else None
    except (msgspec.DecodeError, AttributeError):
        return []
    return threads if isinstance(threads, list) else []


def _token() -> str:
    """A new secret: 32 random bytes, URL-safe. ``secrets`` is imported here, where a
    daemon makes one, not at every ``serve``'s start (it costs some 4 ms there)."""
    import secrets

    return secrets.token_urlsafe(32)


def _write_private(directory: Path, name: str, text: str) -> None:
    """``name`` in ``directory`` (checked as it is opened) made ``text``, 0600. Written
    beside under a name of its own, then renamed over, both in the directory opened: a
    reader sees the old file or the new one, whole, and whatever was at ``name`` (a link
    another put there) is replaced, never followed."""
    with _checked_dir(directory) as dir_fd:
        if dir_fd is None:
            raise _gone(directory)
        tmp, fd = _create_beside(dir_fd, name)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise


def _create_beside(dir_fd: int, name: str) -> tuple[str, int]:
    """A new file (``O_EXCL``: never one that is there, a link least of all) beside ``name``
    in the directory ``dir_fd``, 0600 whatever the umask: its name and descriptor."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = f".{name}.{os.urandom(6).hex()}"
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            continue
        os.fchmod(fd, 0o600)
        return tmp, fd
    raise FileExistsError(errno.EEXIST, f"no free name beside {name}")


def _gone(directory: Path) -> RuntimeDirError:
    return RuntimeDirError(f"runtime directory {directory} is gone", "restart the daemon")


# -- the checks ---------------------------------------------------------------------------


#: How the folder of the directory is opened: only to be checked, and to open the
#: directory in (``O_PATH`` where there is one: no read permission needed).
_FOLDER = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC


def _open_dir(directory: Path, *, create: bool = False) -> int | None:
    """``directory`` opened, not through a symbolic link, in its folder, both checked
    (``None``: it does not exist); with ``create``, made (0700) in the checked folder when
    missing. What is read or written in it is then reached through the descriptor: the
    directory checked is the one used, whatever its name comes to mean meanwhile."""
    full = Path(os.path.abspath(directory))
    if not full.name:  # the root: no folder to check; refused below as root's own
        return _open_in(directory, None, str(full))
    try:
        folder_fd = os.open(full.parent, _FOLDER)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unopened(directory, exc) from None
    try:
        _check_folder(directory, full.parent, folder_fd)
        if create:
            try:
                os.mkdir(full.name, 0o700, dir_fd=folder_fd)
            except FileExistsError:
                pass
            except OSError as exc:
                what = f"cannot create runtime directory {directory}: {exc.strerror}"
                raise RuntimeDirError(what, ANOTHER) from None
        return _open_in(directory, folder_fd, full.name)
    finally:
        os.close(folder_fd)


def _check_folder(directory: Path, folder: Path, folder_fd: int) -> None:
    """Refuse a folder where another user could rename ``directory`` away and put theirs in
    its place: one of another user's (root's is fine: root is trusted), or one others can
    write to without the sticky bit (with it, as in ``/tmp``, only a name's owner may)."""
    found = os.fstat(folder_fd)
    if found.st_uid not in (0, os.getuid()):
        raise RuntimeDirError(
            f"runtime directory {directory} is in {folder}, which belongs to "
            f"{_who(found.st_uid)}, so they could replace it",
            ANOTHER,
        )
    mode = stat.S_IMODE(found.st_mode)
    if mode & 0o022 and not mode & stat.S_ISVTX:
        raise RuntimeDirError(
            f"runtime directory {directory} is in {folder}, which others can write to "
            f"(mode {mode:04o}, without the sticky bit), so they could replace it",
            f"chmod go-w {folder}, or {ANOTHER}",
        )


def _open_in(directory: Path, folder_fd: int | None, name: str) -> int | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=folder_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unopened(directory, exc) from None
    try:
        found = os.fstat(fd)
        if found.st_uid != os.getuid():
            raise RuntimeDirError(
                f"runtime directory {directory} belongs to {_who(found.st_uid)}, not you: "
                "someone else made it",
                f"remove it (as root), or {ANOTHER}",
            )
        mode = stat.S_IMODE(found.st_mode)
        if mode & 0o077:
            raise RuntimeDirError(
                f"runtime directory {directory} is open to other users (mode {mode:04o})",
                f"chmod 700 {directory}",
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unopened(directory: Path, exc: OSError) -> RuntimeDirError:
    """Why ``directory`` could not be opened as a directory, in words."""
    try:
        found = os.lstat(directory)
    except OSError:
        found = None
    if found is not None and stat.S_ISLNK(found.st_mode):
        try:
            target = f" (to {os.readlink(directory)})"
        except OSError:
            target = ""
        return RuntimeDirError(
            f"runtime directory {directory} is a symbolic link{target}, not a directory",
            f"name the directory itself, or {ANOTHER}",
        )
    if found is not None and not stat.S_ISDIR(found.st_mode):
        return RuntimeDirError(
            f"runtime directory {directory} is not a directory", f"remove it, or {ANOTHER}"
        )
    return RuntimeDirError(
        f"cannot use runtime directory {directory}: {exc.strerror or exc}",
        ANOTHER,
    )


@contextlib.contextmanager
def _checked_dir(directory: Path) -> Iterator[int | None]:
    fd = _open_dir(directory)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _open_file(directory: Path, dir_fd: int | None, name: str, flags: int) -> int | None:
    """``name`` in the checked directory (``dir_fd``), opened not through a symbolic link and
    checked: a regular file of this user's, private (``None``: it, or the directory, does
    not exist)."""
    if dir_fd is None:
        return None
    path = directory / name
    try:
        fd = os.open(name, flags | _NOFOLLOW, 0o600, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        try:
            link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            link = False
        if link:
            raise RuntimeDirError(f"{path} is a symbolic link", RENEW) from None
        raise RuntimeDirError(f"cannot open {path}: {exc.strerror or exc}", RENEW) from None
    try:
        found = os.fstat(fd)
        mode = stat.S_IMODE(found.st_mode)
        if not stat.S_ISREG(found.st_mode):
            raise RuntimeDirError(f"{path} is not a regular file", RENEW)
        if found.st_uid != os.getuid():
            raise RuntimeDirError(f"{path} belongs to {_who(found.st_uid)}, not you", RENEW)
        if found.st_nlink > 1:
            raise RuntimeDirError(
                f"{path} has {found.st_nlink} hard links (the same file under another name)",
                RENEW,
            )
        if mode & 0o077:
            raise RuntimeDirError(
                f"{path} is open to other users (mode {mode:04o})", f"chmod 600 {path}"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read(directory: Path, name: str) -> bytes | None:
    """The content of ``name`` in ``directory``, both checked (``None``: either is missing)."""
    with _checked_dir(directory) as dir_fd:
        return _read_in(directory, dir_fd, name)


def _read_in(directory: Path, dir_fd: int | None, name: str) -> bytes | None:
    fd = _open_file(directory, dir_fd, name, os.O_RDONLY)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _who(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"
