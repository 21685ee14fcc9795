"""Codex's binary and its process, before any trio: which binary to run, how npm's launcher is
skipped, starting ``codex app-server`` on pipes. (Codex's own daemon, which the bridge attaches
to and never starts: :mod:`bridge.shell.codex_daemon`.)

Nothing here imports trio: ``serve`` starts Codex with :func:`start_codex` before trio and the
engine are imported, so that Codex's start overlaps the bridge's own (see
:mod:`bridge.shell.early`); the shell adopts the process later
(:func:`bridge.shell.codex_transport.spawn_codex`), as it does one it starts itself.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..redaction import command_line

log = logging.getLogger(__name__)

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


#: Where a Rust backtrace starts: after ``main``'s error (anyhow's) or a panic.
_BACKTRACE = ("Stack backtrace:", "stack backtrace:")
#: anyhow's section of the error's causes, between its message and the backtrace.
_CAUSED_BY = "Caused by:"
#: A cause's number in that section, when there are several (``    0: ...``).
_CAUSE_NUMBER = re.compile(r"\d+: ")
#: Longer than this, Codex's words are cut (they end up in one line of a reply).
MAX_EXIT_WORDS = 1000


def codex_exit_words(lines: Iterable[str]) -> str | None:
    """What Codex said as it stopped, from the last lines of its stderr: its own message,
    not the backtrace that follows it. ``None``: it said nothing.

    A Codex that refuses to start (a setting it no longer supports, a ``CODEX_HOME`` that is
    not there) returns its error from ``main``, which Rust prints as ``Error: MESSAGE``, the
    message's further lines, anyhow's ``Caused by:`` section when there is one, then a blank
    line and ``Stack backtrace:`` with numbered frames (``6: <unknown>``: the last line, and
    a useless reason). Here that becomes ``MESSAGE``, its lines joined by spaces and its causes
    by ``": "`` (anyhow's one-line form). Command-line parsing errors (clap's
    ``error: ...``, then usage) give their one line. Otherwise the last line said before any
    backtrace. The lines may still hold indentation and colours; blank lines may be gone
    (:func:`~bridge.shell.codex_transport.spawn_codex` reads them stripped)."""
    said = [stripped for stripped in (strip_ansi(line).strip() for line in lines) if stripped]
    start = next(
        (i for i in reversed(range(len(said))) if said[i].startswith(("Error: ", "error: "))),
        None,
    )
    if start is None:
        before = list(itertools.takewhile(lambda line: line not in _BACKTRACE, said))
        return _capped(before[-1]) if before else None
    if said[start].startswith("error: "):  # clap's: the rest is usage
        return _capped(said[start].removeprefix("error: "))
    message: list[str] = [said[start].removeprefix("Error: ")]
    causes: list[list[str]] | None = None  # once anyhow's "Caused by:" has begun
    for line in itertools.takewhile(lambda line: line not in _BACKTRACE, said[start + 1 :]):
        if line == _CAUSED_BY:
            causes = []
        elif causes is None:
            message.append(line)
        elif (number := _CAUSE_NUMBER.match(line)) or not causes:
            causes.append([line[number.end() :] if number else line])
        else:
            causes[-1].append(line)
    parts = [" ".join(message), *(" ".join(cause) for cause in causes or ())]
    return _capped(": ".join(parts))


def _capped(text: str) -> str:
    return text if len(text) <= MAX_EXIT_WORDS else text[: MAX_EXIT_WORDS - 1] + "…"


ENV_CODEX_BIN = "CODEX_ACP_BRIDGE_CODEX_BIN"
#: Where the project's setup installs the pinned Codex (``tools/node``).
PINNED_CODEX = (
    Path(__file__).resolve().parents[2] / "tools" / "node" / "node_modules" / ".bin" / "codex"
)


class CodexUnavailable(Exception):
    """Codex could not be started or reached; the message says why and what to do."""


#: A command's exit status when Codex could not be started or reached, or died before it
#: was ready: sysexits.h's ``EX_UNAVAILABLE`` (systemd shows it as ``69/UNAVAILABLE``),
#: not 2, which click gives a command line it cannot use.
EXIT_CODEX_UNAVAILABLE = 69


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
class CodexProcess:
    """A ``codex app-server`` started on three pipes: this process's ends of them, as raw
    file descriptors (blocking) until the shell takes them."""

    popen: subprocess.Popen[bytes]
    #: Codex's stdin (written), stdout and stderr (read).
    stdin: int
    stdout: int
    stderr: int
    #: What was run, for the log.
    argv: list[str]
    #: Codex's output read before the shell took the pipes, not handled yet (the shell's
    #: readers start with it).
    stdout_read: bytes = b""
    stderr_read: bytes = b""

    @property
    def pid(self) -> int:
        return self.popen.pid

    def close(self) -> None:
        """Close this side's ends of the pipes (the process, asked so, exits)."""
        for fd in (self.stdin, self.stdout, self.stderr):
            with contextlib.suppress(OSError):
                os.close(fd)


def start_codex(
    binary: str,
    *,
    config_overrides: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> CodexProcess:
    """Start ``binary app-server`` (npm's launcher skipped, :func:`codex_launch`) on pipes, in
    a process group of its own: stopping the group reaches what it started too (an older Node
    launcher runs Codex as its child), so nothing outlives the bridge. Raises
    :class:`CodexUnavailable` when it cannot be started."""
    launch = codex_launch(binary, os.environ if env is None else env)
    argv = [launch.program, "app-server"]
    for override in config_overrides:
        argv += ["-c", override]
    log.info("starting %s", command_line(argv))
    # os.pipe()'s descriptors are not inherited: the child gets only its three.
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    try:
        popen = subprocess.Popen(
            argv,
            stdin=stdin_r,
            stdout=stdout_w,
            stderr=stderr_w,
            env=launch.env,
            start_new_session=True,
        )
    except OSError as exc:
        for fd in (stdin_w, stdout_r, stderr_r):
            os.close(fd)
        raise CodexUnavailable(f"cannot start Codex ({binary}): {exc.strerror or exc}") from exc
    finally:
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
    return CodexProcess(popen, stdin_w, stdout_r, stderr_r, argv)


def unix_socket_path(url: str) -> str | None:
    """The socket of a ``unix:///path`` URL (``None`` for any other URL)."""
    if not url.startswith("unix://"):
        return None
    path = url.removeprefix("unix://")
    return path or None


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
