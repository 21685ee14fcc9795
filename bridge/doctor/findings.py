"""What ``doctor`` found (gathered by :mod:`bridge.doctor.gather`), before any verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..codex import palette as codex_palette
from ..daemon.runtime import DaemonInfo
from ..profiles import Profiles

#: How Codex 0.169 begins the ``configWarning`` of a config it cannot load (the server runs on
#: its defaults, but every ``thread/start`` fails with the same error).
_CONFIG_IGNORED = "Invalid configuration"


@dataclass(frozen=True)
class CodexBinary:
    """The Codex binary ``serve`` would run, and what its ``--version`` said."""

    #: ``None``: none was found (``problem`` says why).
    path: str | None
    #: Where it came from: ``--codex-bin``, the env var, PATH, the pinned copy.
    source: str = ""
    problem: str = ""
    version: str = ""
    #: Why ``--version`` gave no answer (``None``: it did).
    version_failure: str | None = None


@dataclass(frozen=True)
class CodexWarning:
    """A ``configWarning`` (or ``deprecationNotice``) Codex sent while it started."""

    summary: str
    details: str | None = None
    #: The config file it is about, when Codex names one.
    path: str | None = None

    def text(self) -> str:
        return f"{self.summary} {self.details}" if self.details else self.summary

    @property
    def config_ignored(self) -> bool:
        return self.summary.startswith(_CONFIG_IGNORED)


@dataclass(frozen=True)
class Handshake:
    """What one ``codex app-server`` said: its ``initialize`` answer and what came with it."""

    #: From starting Codex to its ``initialize`` answer (or to giving up).
    seconds: float
    #: Why ``initialize`` got no answer (``None``: it did).
    failure: str | None = None
    user_agent: str = ""
    account: codex_palette.AccountReadResult | None = None
    #: Why ``account/read`` got no answer (``None``: it did, or it was not asked).
    account_failure: str | None = None
    warnings: tuple[CodexWarning, ...] = ()
    #: What Codex made of ``config.toml`` (``None``: it was not asked).
    config: ConfigTrial | None = None


@dataclass(frozen=True)
class ConfigTrial:
    """What Codex said of its config: ``config/read``, then, when that failed, the
    ``thread/start`` that ``serve``'s ``session/new`` sends."""

    #: ``config/read``'s error (``None``: Codex read its config).
    read_error: str | None = None
    #: ``thread/start``'s error, what every ``session/new`` will answer (``None``: the thread
    #: started, or it was not tried because ``config/read`` succeeded).
    session_error: str | None = None


@dataclass(frozen=True)
class ConfigFile:
    """``CODEX_HOME/config.toml`` as ``tomllib`` reads it."""

    path: Path
    exists: bool
    #: ``None`` when it is missing or does not parse.
    parsed: dict[str, Any] | None = None
    #: Why it does not parse (or cannot be read): tomllib's words.
    error: str | None = None


@dataclass(frozen=True)
class Environment:
    """What of the user's environment and ``CODEX_HOME`` decides credentials."""

    codex_home: Path
    auth_file: bool
    #: The names of the environment variables set (not empty); never their values.
    variables: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RuntimeDir:
    """The daemon's runtime directory, as found."""

    path: Path
    exists: bool
    #: A daemon holds the lock now.
    daemon_running: bool = False
    #: What its ``daemon.json`` says (``None``: unreadable, or no daemon runs).
    daemon: DaemonInfo | None = None
    #: Why the directory, or a file in it, is not trusted or cannot be looked at (as
    #: :func:`bridge.daemon.runtime.check_dir` says it), and how to put it right.
    error: str | None = None
    fix: str = ""


@dataclass(frozen=True)
class Findings:
    binary: CodexBinary
    #: ``None``: Codex was not started (no binary).
    handshake: Handshake | None
    config: ConfigFile
    environment: Environment
    runtime: RuntimeDir
    #: The sentence ``serve`` would print about the Codex it uses ("Codex: ...").
    choice: str = ""
    #: That Codex is one of its own, which cannot start (no binary).
    choice_fails: bool = False
    #: Each machine the user named (the machines file and ``--machine``), in their order.
    machines: tuple[MachineFound, ...] = ()
    #: Why the machines named cannot be used as written (the file or a flag).
    machines_error: str | None = None
    #: The config profiles as ``serve`` would use them, and why the one named cannot be
    #: used (``None``: it can, or none is named).
    profiles: Profiles = field(default_factory=Profiles)
    profile_error: str | None = None


@dataclass(frozen=True)
class ExecServer:
    """What a machine's exec-server answered to ``initialize``
    (:mod:`bridge.doctor.machine_probe`)."""

    #: From sending ``initialize`` to its answer (or to giving up).
    seconds: float
    #: Why it gave no answer (``None``: it did).
    failure: str | None = None
    #: ``environmentInfo.executorVersion``: the Codex that runs the commands there.
    executor_version: str = ""
    #: ``environmentInfo.shell.name`` and ``cwd`` (a ``file://`` URI).
    shell: str = ""
    cwd: str = ""


@dataclass(frozen=True)
class MachineFound:
    """What reaching one machine the user named showed, stage by stage: each stage is
    ``None`` when it was not reached."""

    name: str
    #: As a person reads it: ``me@devbox:2222``, or a ws machine's URL.
    where: str
    #: Reached with a command of the bridge's (ssh, a container, a command machine), not
    #: an exec-server someone runs (ws).
    ssh: bool
    #: Which: ``ssh``, ``podman``, ``docker``, ``command`` (or ``ws``, ``wss``).
    kind: str = "ssh"
    #: The remote ``codex`` as named (``?codex=``); ssh machines.
    codex: str = "codex"
    #: The command that reaches it, for the user to run in a terminal (ssh machines: the
    #: ssh login, without a remote command).
    login: str = ""
    #: This machine's Codex version, which the machine's must equal (``None``: unknown).
    local_version: str | None = None
    #: Seconds to reach it (ssh: to the remote ``codex --version``'s line; ws: to a TCP
    #: connection).
    reach_seconds: float = 0.0
    #: Why it was not reached: ssh's own words (a refused login, a host key, a timeout),
    #: or the TCP connection's failure (``None``: reached).
    unreachable: str | None = None
    #: Reached, but its Codex did not run: not found (exit status 127), or its own words.
    codex_failure: str | None = None
    #: What the remote ``codex --version`` said (ssh; ``None``: nothing came).
    version_line: str | None = None
    #: Its exec-server's answer to ``initialize`` (``None``: not tried).
    server: ExecServer | None = None
