"""Gathering the findings (I/O): the binary and its version, ``config.toml``, the runtime
directory, which Codex ``serve`` would use, the handshake, and each machine named."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from ..daemon.runtime import RuntimeDirError, check_dir, daemon_running, read_info, runtime_dir
from ..machines import MachineSpec
from ..machines import codex_version as version_of
from ..shell.codex_process import codex_launch
from ..shell.codex_transport import (
    ENV_CODEX_BIN,
    CodexUnavailable,
    find_codex,
    strip_ansi,
)
from .findings import (
    CodexBinary,
    ConfigFile,
    Environment,
    Findings,
    MachineFound,
    RuntimeDir,
)
from .handshake import shake_hands
from .machine_probe import probe_all

#: How long ``codex --version`` may take.
VERSION_SECONDS = 10.0


async def gather(
    codex_bin: str | None,
    runtime: str | None,
    env: Mapping[str, str],
    *,
    machines: Sequence[MachineSpec] = (),
    ssh: Sequence[str] = (),
    machines_error: str | None = None,
    profile: str | None = None,
) -> Findings:
    """Everything doctor looks at; the handshake and the machines at once. ``profile``:
    the config profile named (``--profile``)."""
    binary = await find_binary(codex_bin, env)
    handshake = None
    found: tuple[MachineFound, ...] = ()

    async def shake() -> None:
        nonlocal handshake
        handshake = await shake_hands(binary.path) if binary.path is not None else None

    async def reach() -> None:
        nonlocal found
        # The program npm's launcher runs (its vendor folder is what a container gets).
        program = codex_launch(binary.path, env).program if binary.path else None
        found = await probe_all(machines, list(ssh) or ["ssh"], version_of(binary.version), program)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(shake)
        if machines:
            nursery.start_soon(reach)
    codex_home = Path(env.get("CODEX_HOME") or Path.home() / ".codex")
    return Findings(
        binary=binary,
        handshake=handshake,
        config=read_config(codex_home / "config.toml"),
        environment=Environment(
            codex_home=codex_home,
            auth_file=(codex_home / "auth.json").is_file(),
            variables=frozenset(name for name, value in env.items() if value),
        ),
        runtime=inspect_runtime_dir(runtime_dir(runtime, env)),
        **_choice(codex_bin, runtime, env, own=binary.path, profile=profile),
        machines=found,
        machines_error=machines_error,
    )


def _choice(
    codex_bin: str | None,
    runtime: str | None,
    env: Mapping[str, str],
    *,
    own: str | None,
    profile: str | None = None,
) -> dict[str, Any]:
    """Which Codex ``serve`` would use, and the profiles it would give its threads."""
    from ..codex_choice import ServeOptions, choose_codex
    from ..profiles import ProfileError
    from ..serve import read_profiles

    options = ServeOptions(codex_bin=codex_bin, runtime_dir=runtime, profile=profile)
    choice = choose_codex(options, env)
    shared = choice.daemon is not None or choice.url is not None
    found: dict[str, Any] = {"choice": choice.says, "choice_fails": not shared and own is None}
    try:
        found["profiles"] = read_profiles(options, choice, env)
    except ProfileError as exc:
        found["profile_error"] = str(exc)
    return found


async def find_binary(codex_bin: str | None, env: Mapping[str, str]) -> CodexBinary:
    try:
        path = find_codex(codex_bin, env)
    except CodexUnavailable as exc:
        return CodexBinary(None, problem=str(exc))
    if codex_bin:
        source = "--codex-bin"
    elif env.get(ENV_CODEX_BIN):
        source = f"${ENV_CODEX_BIN}"
    elif shutil.which("codex"):
        source = "PATH"
    else:
        source = "the pinned copy"
    version, failure = await codex_version(path)
    return CodexBinary(path, source=source, version=version, version_failure=failure)


async def codex_version(binary: str) -> tuple[str, str | None]:
    """``binary --version``'s answer, or why there is none (as the daemon asks it, but
    bounded in time: a binary that is not Codex may never answer)."""
    try:
        with trio.fail_after(VERSION_SECONDS):
            done = await trio.run_process(
                [binary, "--version"],
                capture_stdout=True,
                capture_stderr=True,
                stdin=subprocess.DEVNULL,
                check=False,
            )
    except OSError as exc:
        return "", str(exc.strerror or exc)
    except trio.TooSlowError:
        return "", f"no answer within {VERSION_SECONDS:g} s"
    said = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0:
        err = strip_ansi(done.stderr.decode(errors="replace")).strip().splitlines()
        return "", f"exit status {done.returncode}" + (f": {err[-1]}" if err else "")
    return said, None


def read_config(path: Path) -> ConfigFile:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ConfigFile(path, exists=False)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        return ConfigFile(path, exists=True, error=f"cannot read it: {why}")
    try:
        return ConfigFile(path, exists=True, parsed=tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        return ConfigFile(path, exists=True, error=str(exc))


def inspect_runtime_dir(directory: Path) -> RuntimeDir:
    """What is there, changing nothing, checked as ``serve`` and ``daemon`` check it
    (:func:`bridge.daemon.runtime.check_dir`): nothing is read from a directory they refuse."""
    try:
        if not check_dir(directory):
            return RuntimeDir(directory, exists=False)
        running = daemon_running(directory)
        info = read_info(directory) if running else None
    except RuntimeDirError as exc:
        return RuntimeDir(directory, exists=True, error=exc.what, fix=exc.fix)
    return RuntimeDir(directory, exists=True, daemon_running=running, daemon=info)
