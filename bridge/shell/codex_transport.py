"""Reaching Codex's app-server: spawn it on stdio, or attach over WebSocket."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from .streams import DEFAULT_MAX_MESSAGE, LineStream, MessageStream, WebSocketStream

log = logging.getLogger(__name__)
codex_log = logging.getLogger("codex")

#: Terminal escape sequences: Codex colours its log lines even when its stderr is a pipe.
_ANSI = re.compile(
    r"""
      \x1b\[ [0-?]* [ -/]* [@-~]        # CSI: colours, cursor moves, erases (ESC [ 2 m)
    | \x1b[]PX^_] .*? (?:\x07|\x1b\\|$)  # OSC, DCS, SOS, PM, APC: to BEL, ST or line end
    | \x1b[ -/]* [0-~]                 # the other escapes (ESC ( B, ESC =, ESC 7)
    | \x1b                             # a lone or cut-off ESC
    """,
    re.VERBOSE | re.DOTALL,
)


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences: Codex's stderr lines, before they are
    logged (so a ``--log-file`` holds text) or become the reason Codex stopped."""
    return _ANSI.sub("", text)


ENV_CODEX_BIN = "CODEX_ACP_BRIDGE_CODEX_BIN"
#: Where the project's setup installs the pinned Codex (``tools/node``).
PINNED_CODEX = (
    Path(__file__).resolve().parents[2] / "tools" / "node" / "node_modules" / ".bin" / "codex"
)


class CodexUnavailable(Exception):
    """Codex could not be started or reached; the message says why and what to do."""


def find_codex(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The Codex binary to run: ``--codex-bin``, the env var, PATH, the pinned copy."""
    env = os.environ if env is None else env
    if explicit:
        return _checked(explicit, "--codex-bin")
    if env.get(ENV_CODEX_BIN):
        return _checked(env[ENV_CODEX_BIN], ENV_CODEX_BIN)
    on_path = shutil.which("codex")
    if on_path:
        return on_path
    if PINNED_CODEX.exists():
        return str(PINNED_CODEX)
    # A clone has the project's setup to run; an installed package has only npm's Codex.
    setup = (
        "or run the project's setup (which installs @openai/codex into tools/node)"
        if PINNED_CODEX.parents[4].joinpath("scripts", "setup").exists()
        else "or install Codex: npm install -g @openai/codex"
    )
    raise CodexUnavailable(
        f"no Codex binary found: pass --codex-bin PATH, set {ENV_CODEX_BIN}, put `codex` on "
        f"PATH, {setup}"
    )


#: Node's (platform, arch) → the Rust target triple and the npm package holding its build,
#: as ``@openai/codex``'s launcher (``bin/codex.js``) maps them.
_NPM_TARGETS = {
    ("linux", "x86_64"): ("x86_64-unknown-linux-musl", "codex-linux-x64"),
    ("linux", "aarch64"): ("aarch64-unknown-linux-musl", "codex-linux-arm64"),
    ("darwin", "x86_64"): ("x86_64-apple-darwin", "codex-darwin-x64"),
    ("darwin", "arm64"): ("aarch64-apple-darwin", "codex-darwin-arm64"),
}
#: What the launcher sets for the native binary: the package manager it was installed with.
_MANAGED_BY = (
    "CODEX_MANAGED_BY_NPM",
    "CODEX_MANAGED_BY_BUN",
    "CODEX_MANAGED_BY_PNPM",
    "CODEX_MANAGED_BY_VITE_PLUS",
)


@dataclass(frozen=True)
class CodexLaunch:
    """What to execute for a Codex binary, and with which environment."""

    program: str
    env: dict[str, str]


def codex_launch(
    binary: str, env: Mapping[str, str], *, system: tuple[str, str] | None = None
) -> CodexLaunch:
    """How to run ``binary``: npm's launcher for Codex, when its layout is recognised, is
    replaced by the native binary it would run, with the environment it would give it.

    The launcher (``@openai/codex/bin/codex.js``, which ``codex`` on PATH or in
    ``node_modules/.bin`` links to) starts Node only to find that binary and run it
    (exec'ing it, or, before Node 22.15, as its child, Node staying for the session):
    ~100 ms before Codex even starts. Anything else, or a layout this does not know,
    runs as it is. ``system``: Node's platform and the machine (default: this one).
    """
    unchanged = CodexLaunch(binary, dict(env))
    if system is None:
        if not hasattr(os, "uname"):
            return unchanged  # Windows: npm's launcher there is a .cmd shim
        system = (sys.platform, os.uname().machine)
    target = _NPM_TARGETS.get(system)
    script = Path(os.path.realpath(binary))
    if target is None or script.parts[-4:] != ("@openai", "codex", "bin", "codex.js"):
        return unchanged
    root = script.parents[1]  # the launcher's codexPackageRoot
    triple, package = target
    # Where Node's require.resolve() finds the platform package from the launcher (nested,
    # then beside it), else the launcher's own vendor directory.
    vendors = [
        root / "node_modules" / "@openai" / package / "vendor",
        root.parent / package / "vendor",
        root / "vendor",
    ]
    native = next(
        (
            str(path)
            for path in (vendor / triple / "bin" / "codex" for vendor in vendors)
            if path.is_file() and os.access(path, os.X_OK)
        ),
        None,
    )
    manager = _package_manager(root, Path(os.path.abspath(binary)).parent, env)
    if native is None or manager is None:
        return unchanged
    launch_env = {k: v for k, v in env.items() if k not in _MANAGED_BY}
    launch_env["CODEX_MANAGED_PACKAGE_ROOT"] = str(root)
    launch_env[f"CODEX_MANAGED_BY_{manager}"] = "1"
    return CodexLaunch(native, launch_env)


def _package_manager(root: Path, entrypoint_dir: Path, env: Mapping[str, str]) -> str | None:
    """The package manager the launcher would name (``NPM`` when it cannot tell), as its
    ``detectPackageManager`` does; ``None`` for a Vite+ install, not reproduced here."""
    for start in dict.fromkeys((root, entrypoint_dir)):
        for directory in (start, *start.parents):
            if directory.name == "packages" and (directory / "@openai" / "codex.json").exists():
                return None
            modules = directory / "node_modules"
            if (modules / ".modules.yaml").exists():
                with contextlib.suppress(OSError):
                    if Path(os.path.realpath(modules / "@openai" / "codex")) == root:
                        return "PNPM"
    if (
        re.search(r"\bbun/", env.get("npm_config_user_agent", ""))
        or "bun" in env.get("npm_execpath", "")
        or ".bun/install/global" in str(root / "bin")
    ):
        return "BUN"
    return "NPM"


def _checked(path: str, source: str) -> str:
    resolved = shutil.which(path) or path
    if not Path(resolved).exists():
        raise CodexUnavailable(f"Codex binary {path!r} (from {source}) does not exist")
    if not os.access(resolved, os.X_OK):
        raise CodexUnavailable(f"Codex binary {path!r} (from {source}) is not executable")
    return resolved


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
) -> AsyncIterator[CodexConnection]:
    """Run ``codex app-server`` on stdio; its stderr goes to the ``codex`` logger."""
    launch = codex_launch(binary, os.environ if env is None else env)
    if launch.program != binary:
        log.debug("%s is npm's launcher for Codex; running its native binary", binary)
    log.debug("Codex binary: %s", launch.program)
    argv = [launch.program, "app-server"]
    for override in config_overrides:
        argv += ["-c", override]
    log.info("starting %s", " ".join(argv))
    try:
        # A process group of its own: stopping it reaches what it started too (an older
        # Node launcher runs Codex as its child), so nothing outlives the bridge.
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=launch.env,
            start_new_session=True,
        )
    except OSError as exc:
        raise CodexUnavailable(f"cannot start Codex ({binary}): {exc.strerror or exc}") from exc
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stream = LineStream(process.stdout, process.stdin, max_message=max_message)
    tail: list[str] = []
    stderr_done = trio.Event()

    async def describe_exit() -> str:
        # Give the process a moment to finish dying and its last words to arrive:
        # "exited with status 1" alone helps nobody.
        with trio.move_on_after(2):
            await process.wait()
            await stderr_done.wait()
        code = process.poll()
        why = f"exited with status {code}" if code is not None else "closed its output"
        last = f": {tail[-1]}" if tail else ""
        return f"Codex app-server {why}{last}"

    async def pump_stderr() -> None:
        assert process.stderr is not None
        lines = LineStream(process.stderr, None, max_message=1024 * 1024)
        while True:
            try:
                line = (await lines.receive()).decode(errors="replace")
            except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
                stderr_done.set()
                return
            except Exception:  # an oversized or broken log line is not worth dying for
                continue
            line = strip_ansi(line)
            tail[:] = [line]
            codex_log.info("%s", line)

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


async def close_and_wait(process: trio.Process, *, close: float, wait: float) -> None:
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
    url: str, *, token_file: str | None = None, max_message: int = DEFAULT_MAX_MESSAGE
) -> AsyncIterator[CodexConnection]:
    """Attach to ``codex app-server --listen ws://...`` over WebSocket, or, for
    ``unix:///path``, over a Unix socket (Codex's own daemon: ``codex app-server
    daemon``, whose socket takes no token)."""
    from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI
    from websockets.trio.client import connect, unix_connect

    headers = {}
    if token_file:
        try:
            token = (await trio.Path(token_file).read_text()).strip()
        except OSError as exc:
            raise CodexUnavailable(
                f"cannot read --codex-token-file {token_file}: {exc.strerror}"
            ) from exc
        headers["Authorization"] = f"Bearer {token}"
    socket_path = unix_socket_path(url)
    opener: Callable[..., Any]
    if socket_path is not None:
        # The HTTP request of the handshake still needs a URI; the socket decides where.
        # Codex's daemon socket is a link to a short path: a socket's path has at most
        # ~107 bytes, which a deep CODEX_HOME exceeds.
        resolved = str(await trio.Path(socket_path).resolve())
        opener = functools.partial(unix_connect, resolved, "ws://localhost/")
    else:
        opener = functools.partial(connect, url)
    async with AsyncExitStack() as stack:
        try:
            ws = await stack.enter_async_context(
                opener(
                    additional_headers=headers,
                    max_size=max_message,
                    # Read the socket whatever the bridge's pace: Codex drops a WebSocket
                    # it cannot write to, so frames the bridge has not handled yet are
                    # better held here than lost with the connection.
                    max_queue=None,
                    compression=None,
                    **({} if socket_path is not None else {"proxy": None}),
                    open_timeout=10,
                    close_timeout=3,
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
            reason = ws.close_reason or ""
            return f"WebSocket connection to Codex at {url} closed{': ' + reason if reason else ''}"

        yield CodexConnection(WebSocketStream(ws), describe_exit, waits=False)


def unix_socket_path(url: str) -> str | None:
    """The socket of a ``unix:///path`` URL (``None`` for any other URL)."""
    if not url.startswith("unix://"):
        return None
    path = url.removeprefix("unix://")
    return path or None


#: Where Codex's own daemon (``codex app-server daemon start``) listens, in ``CODEX_HOME``.
CODEX_DAEMON_SOCKET = Path("app-server-control") / "app-server-control.sock"


def codex_daemon_socket(codex_home: str) -> Path:
    return Path(codex_home) / CODEX_DAEMON_SOCKET


def codex_daemon_version(codex_home: str) -> str | None:
    """The version of the copy Codex's daemon runs (``packages/app-server-daemon/current``
    links to ``releases/VERSION-TARGET``), if it can be told."""
    current = Path(codex_home) / "packages" / "app-server-daemon" / "current"
    try:
        release = Path(os.readlink(current)).name
    except OSError:
        return None
    return release.split("-", 1)[0] or None


def codex_daemon_pid(codex_home: str) -> int | None:
    """The pid Codex's daemon publishes (``app-server-daemon/daemon.pid``), if readable."""
    import json

    try:
        pid = json.loads((Path(codex_home) / "app-server-daemon" / "daemon.pid").read_text())["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) else None


def codex_version_of(binary: str, timeout: float = 5.0) -> str | None:
    """``binary --version``'s version number (``codex-cli 0.169.0`` → ``0.169.0``)."""
    launch = codex_launch(binary, os.environ)
    try:
        done = subprocess.run(
            [launch.program, "--version"],
            env=launch.env,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.decode(errors="replace").split()
    return words[-1] if words else None


def codex_daemon_answers(socket_path: Path, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on Codex's daemon socket (a socket file
    left by a daemon that died refuses them)."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(timeout)
            probe.connect(os.path.realpath(socket_path))
    except OSError:
        return False
    return True
