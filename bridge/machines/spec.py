"""A machine as the user named it (:class:`MachineSpec`), its kinds and their words."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..token_urls import plain_text_refusal

#: Where the user keeps their machines, unless ``$CODEX_ACP_BRIDGE_MACHINES`` names a file.
ENV_MACHINES_FILE = "CODEX_ACP_BRIDGE_MACHINES"
#: The command that runs ssh, as ``GIT_SSH_COMMAND`` (``--ssh-command`` wins).
ENV_SSH_COMMAND = "CODEX_ACP_BRIDGE_SSH_COMMAND"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
#: What every ssh the bridge runs is given, beside the user's own configuration: no
#: prompt (there is no terminal: an editor started the bridge), and a dead link noticed
#: within a minute. Host keys, identities, ProxyJump: the user's, untouched.
SSH_OPTIONS = ("-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=15")


#: The container runtimes a URL may name (each its own scheme), run by that name from ``PATH``.
RUNTIMES = ("podman", "docker")
#: What a machine of the machines file's ``command = [...]`` is said to be (no URL).
COMMAND = "command"
#: A folder's dev container, brought up with the devcontainers CLI.
DEVCONTAINER = "devcontainer"
#: A fresh container for each session, from an image (a machines-file entry ``image =``).
SANDBOX = "sandbox"
#: The kinds of machine the bridge reaches with a command of its own (and relays).
RELAYED = ("ssh", *RUNTIMES, COMMAND, DEVCONTAINER, SANDBOX)
#: Where a session's container has this bridge's Codex (its vendor folder, read-only).
SANDBOX_CODEX_DIR = "/opt/codex-acp-bridge-codex"
#: The labels of a session's container: the machine it is of, and the process that made
#: it (``PID:START``, its start time in clock ticks since boot: a pid is reused).
SANDBOX_LABEL = "codex-acp-bridge.machine"
OWNER_LABEL = "codex-acp-bridge.owner"
#: What :attr:`MachineSpec.bring` may be besides ``""``.
BRING_IF_NEEDED = "if-needed"
BRING_ALWAYS = "always"
#: ``?codex=auto``: the bridge brings its own Codex.
AUTO = "auto"

#: Between a per-session machine's name and the thread's id (``bridge.engine``'s own).
SESSION_MARK = "@"

#: A container's name or ID, as podman and docker allow them.
CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class MachineError(ValueError):
    """A machine the user named cannot be used as written (the message says why)."""


@dataclass(frozen=True, slots=True)
class MachineSpec:
    """One machine, as the user named it."""

    name: str
    url: str
    scheme: str
    host: str
    user: str | None = None
    port: int | None = None
    #: Where its sessions work; ``""``: each session's own ``cwd``.
    path: str = ""
    #: The ``codex`` there (every kind but ws).
    codex: str = "codex"
    #: A command machine's own words, before ``CODEX exec-server --listen stdio``.
    command: tuple[str, ...] = ()
    #: The exec-server's capability token (ws machines).
    token_file: str | None = None
    description: str = ""
    #: Whether the bridge copies its own Codex in (containers only): ``""`` never (the
    #: user named the Codex there), :data:`BRING_IF_NEEDED` when ``codex`` there is
    #: missing or of another version, :data:`BRING_ALWAYS` (``?codex=auto``).
    bring: str = ""
    #: A dev container's runtime (``--docker-path``): ``podman``, ``docker`` (``""``: the
    #: CLI's default, docker); a sandbox's (``podman`` or ``docker``).
    runtime: str = ""
    #: A sandbox's image, and what its containers are given: the session's folders
    #: mounted at their own paths (``mount``), a ``--network`` (``""``: the runtime's
    #: default), more ``run`` arguments.
    image: str = ""
    mount: bool = True
    network: str = ""
    run_args: tuple[str, ...] = ()

    @property
    def ssh(self) -> bool:
        return self.scheme == "ssh"

    @property
    def relayed(self) -> bool:
        """Reached with a command of the bridge's (ssh, a container, a command), whose
        stdio the link relays; not an exec-server someone runs (ws)."""
        return self.scheme in RELAYED

    def where(self) -> str:
        """The machine as a person reads it: ``me@devbox:2222``, ``podman container
        devbox``, ``kubectl exec -i pod/devbox --``."""
        if self.scheme in RUNTIMES:
            user = f" as {self.user}" if self.user else ""
            return f"{self.scheme} container {self.host}{user}"
        if self.scheme == DEVCONTAINER:
            return f"the dev container of {self.host}"
        if self.scheme == SANDBOX:
            return f"a {self.runtime} container of {self.image} for each session"
        if self.scheme == COMMAND:
            return shlex.join(self.command)
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


#: The kinds whose place says what it is already: ``podman container devbox``, ``the dev
#: container of /home/me/src/app``, ``a podman container of debian:bookworm for each session``.
_SAID_IN_PLACE = (*RUNTIMES, DEVCONTAINER, SANDBOX)


def kind_and_where(kind: str, where: str) -> str:
    """A machine's kind (:attr:`MachineSpec.scheme`) and where it is
    (:meth:`MachineSpec.where`), as a person reads them: ``ssh me@gpu``, ``command kubectl
    exec -i pod/devbox --``; a place that says its kind already is as it is (``podman
    container devbox``, ``ws://127.0.0.1:4600``). Either may be ``""`` (an older
    ``daemon.json`` has neither)."""
    if not kind or kind in _SAID_IN_PLACE or where.startswith(f"{kind}://"):
        return where
    return f"{kind} {where}" if where else kind


def container_codex(query: dict[str, list[str]]) -> tuple[str, str]:
    """A container's (or a dev container's) Codex, from its URL's ``?codex=``: the Codex
    there, and whether the bridge brings its own (:attr:`MachineSpec.bring`): when none is
    named, where the container's will not do; with ``auto``, always."""
    named = query.get("codex", [""])[-1]
    if named == AUTO:
        return "codex", BRING_ALWAYS
    return (named, "") if named else ("codex", BRING_IF_NEEDED)


def check_name(name: str) -> None:
    """:class:`MachineError` unless ``name`` can name a machine (and, with
    :data:`SESSION_MARK`, its sessions' places: ``NAME@THREAD``)."""
    if not _NAME.fullmatch(name) or name == "local":
        raise MachineError(
            f"machine name {name!r}: letters, digits, '.', '_' and '-' (and not 'local', "
            "which is this machine)"
        )


def token_refusal(name: str, url: str) -> str | None:
    """Why machine ``name``'s exec-server at ``url`` must not be sent its token (``None``:
    it may): plain-text ``ws://`` to a host that is not loopback."""
    why = plain_text_refusal(url)
    if why is None:
        return None
    return (
        f"machine {name}: {why}: use wss:// for it, or an ssh:// machine (its exec-server "
        "reached over your ssh)"
    )
