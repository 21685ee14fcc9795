"""Which Codex ``serve`` uses: the bridge's daemon's, when one runs and is the one the editor
asked for; else Codex's own daemon of the editor's ``CODEX_HOME``, on the same terms; else a
Codex of its own. With the options it is chosen from (:class:`ServeOptions`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .daemon.runtime import DaemonInfo, RuntimeDirError, codex_home, running_daemon, runtime_dir
from .profiles import PROCESS_WIDE_KEYS
from .shell import codex_daemon
from .shell.codex_process import ENV_CODEX_BIN, CodexUnavailable, codex_version_of, find_codex
from .shell.restart import Restart


@dataclass
class ServeOptions:
    codex_bin: str | None = None
    codex_url: str | None = None
    codex_token_file: str | None = None
    #: The ``-c KEY=VALUE`` overrides as typed, for a spawned Codex's command line.
    config_overrides: list[str] = field(default_factory=list)
    #: The same overrides parsed (the CLI parses them, rejecting malformed ones,
    #: so the shell never depends on the CLI), for an attached Codex's thread/start.
    parsed_overrides: dict[str, Any] = field(default_factory=dict)
    #: How a lost Codex is brought back (``None``: never).
    restart: Restart | None = field(default_factory=Restart)
    #: The daemon's runtime directory (``None``: the default one), and whether to
    #: attach to a daemon running there.
    runtime_dir: str | None = None
    use_daemon: bool = True
    #: The machines sessions may act on (``bridge.machines``), and how ssh is run.
    machines: tuple[Any, ...] = ()
    ssh_command: list[str] = field(default_factory=list)
    #: The Codex config profile named (``--profile``, ``$CODEX_ACP_BRIDGE_PROFILE``).
    profile: str | None = None

    def daemon_dir(self) -> Path | None:
        """The runtime directory of the daemon to attach to, if one runs and should be used."""
        return choose_codex(self).daemon

    def attached(self, choice: CodexChoice) -> bool:
        """Whether the chosen Codex is one the bridge attaches to (not one it spawns)."""
        return bool(self.codex_url) or choice.daemon is not None or choice.url is not None


@dataclass(frozen=True)
class CodexChoice:
    """Which Codex ``serve`` uses, and the one line that says which and why."""

    #: The runtime directory of the daemon to attach to (``None``: not a daemon's Codex).
    daemon: Path | None
    says: str
    #: A daemon runs: whether it is used or not, the user is told (it is not obvious).
    daemon_runs: bool = False
    #: Codex's own daemon (``codex app-server daemon``) to attach to: its ``unix://`` URL.
    url: str | None = None
    #: Why the runtime directory is not trusted, and how to fix it (``""``: it is, or there
    #: is none): nothing in it is read, and ``serve`` goes on as without a daemon.
    refused: str = ""


def choose_codex(options: ServeOptions, env: Mapping[str, str] | None = None) -> CodexChoice:
    """The bridge's daemon's Codex when one runs and is the one the editor asked for (the
    same ``CODEX_HOME``, no other binary, no override a thread cannot take); else Codex's
    own daemon of that ``CODEX_HOME`` when it answers on its socket (on the same terms);
    else a Codex of its own. ``env``: the editor's environment (default: this process's)."""
    env = os.environ if env is None else env
    if options.codex_url:
        return CodexChoice(None, f"Codex: the app-server at {options.codex_url} (--codex-url)")
    try:
        own = f"its own, {find_codex(options.codex_bin, env)}"
    except CodexUnavailable as exc:
        own = f"its own, which cannot start ({exc})"
    if not options.use_daemon:
        return CodexChoice(None, f"Codex: {own} (--no-daemon)")
    directory = runtime_dir(options.runtime_dir, env)
    try:
        info = running_daemon(directory)
    except RuntimeDirError as exc:
        # Another user's directory must not take the editor down: what it says is not
        # read, and the editor gets the Codex it would get with no daemon at all.
        chosen = _codex_daemon_or_own(options, own, f"{directory} not trusted", env)
        return replace(chosen, refused=str(exc))
    if info is None:
        return _codex_daemon_or_own(options, own, f"no daemon runs on {directory}", env)
    why = _not_the_daemons(options, info, env)
    if why and codex_daemon.answers(codex_daemon.socket_path(codex_home(env))):
        # Not the bridge's daemon, but Codex's own of the editor's CODEX_HOME may fit.
        not_ours = f"not the daemon's (pid {info.pid}): {why}"
        return replace(_codex_daemon_or_own(options, own, not_ours, env), daemon_runs=True)
    if why:
        says = f"Codex: {own}, not the daemon's (pid {info.pid}): {why}"
        return CodexChoice(None, says, daemon_runs=True)
    where = info.url or f"(now {info.state})"
    return CodexChoice(
        directory,
        f"Codex: the daemon's at {where} (daemon pid {info.pid}, Codex pid {info.codexPid}, "
        f"{info.codexVersion or 'version unknown'}; CODEX_HOME {info.codexHome}"
        + (f"; profile {info.profile} unless the editor names one" if info.profile else "")
        + "); commands run in the daemon's environment",
        daemon_runs=True,
    )


def _codex_daemon_or_own(
    options: ServeOptions, own: str, no_bridge_daemon: str, env: Mapping[str, str]
) -> CodexChoice:
    """Codex's own daemon of the editor's ``CODEX_HOME`` when it answers and may be
    used; else a Codex of the bridge's own. The bridge does not start Codex's daemon:
    it would outlive the editor, unasked (see docs/operations.md)."""
    home = codex_home(env)
    socket = codex_daemon.socket_path(home)
    if not codex_daemon.answers(socket):
        return CodexChoice(None, f"Codex: {own}; {no_bridge_daemon}, no Codex daemon on {socket}")
    version = codex_daemon.version(home)
    why = _not_for_a_shared_codex(options, None, env, version=version)
    if why:
        says = f"Codex: {own}, not Codex's daemon on {socket}: {why}"
        return CodexChoice(None, says, daemon_runs=True)
    pid = codex_daemon.pid(home)
    return CodexChoice(
        None,
        f"Codex: Codex's daemon on {socket} (pid {pid or 'unknown'}, "
        f"{version or 'version unknown'}; CODEX_HOME {home}; {no_bridge_daemon}); "
        "commands run in that daemon's environment",
        daemon_runs=True,
        url=f"unix://{socket}",
    )


def _not_for_a_shared_codex(
    options: ServeOptions,
    daemon_binary: str | None,
    env: Mapping[str, str],
    *,
    version: str | None = None,
) -> str:
    """Why a Codex already running is not the one asked for ("" when it is): another
    binary (the bridge's daemon: ``daemon_binary``, its real path), another version
    (Codex's daemon runs a managed copy of its own: ``version``), or a process-wide
    override."""
    asked = options.codex_bin or env.get(ENV_CODEX_BIN)
    if asked:
        source = "--codex-bin" if options.codex_bin else ENV_CODEX_BIN
        try:
            binary = os.path.realpath(find_codex(options.codex_bin, env))
        except CodexUnavailable as exc:
            return str(exc)
        if daemon_binary is not None and binary != daemon_binary:
            return f"{source} names {asked}, the daemon runs {daemon_binary}"
        if daemon_binary is None:
            named = codex_version_of(binary)
            if named is None or named != version:
                return (
                    f"{source} names {asked} ({named or 'version unknown'}), Codex's daemon "
                    f"runs {version or 'another version'}"
                )
    whole = sorted(k for k in options.parsed_overrides if k.split(".")[0] in PROCESS_WIDE_KEYS)
    if whole:
        return f"-c {whole[0]} applies to a whole Codex, not to one thread"
    return ""


def _not_the_daemons(options: ServeOptions, info: DaemonInfo, env: Mapping[str, str]) -> str:
    """Why the daemon's Codex is not the one asked for ("" when it is)."""
    home = codex_home(env)
    if info.codexHome != home:
        return f"the daemon serves CODEX_HOME {info.codexHome or '(unknown)'}, not {home}"
    if info.url.startswith("unix://"):
        # The daemon uses Codex's own daemon, which runs a managed copy of its own.
        return _not_for_a_shared_codex(options, None, env, version=codex_daemon.version(home))
    return _not_for_a_shared_codex(options, info.codexBin or "(unknown)", env)
