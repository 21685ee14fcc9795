"""Machines the user names, where sessions may act: parsed, read from their file, and the
commands that reach them. No trio, no sockets (the shell's link runs them:
``bridge/shell/machine_link.py``).

A machine is ``NAME=URL``:

- ``ssh://[USER@]HOST[:PORT][/PATH][?codex=/path/to/codex]``: the bridge runs the user's
  own ``ssh`` (or ``--ssh-command``, as git's ``GIT_SSH_COMMAND``) to start
  ``codex exec-server --listen stdio`` on HOST, over the SSH channel itself: nothing
  listens on HOST, and here only on loopback;
- ``podman://CONTAINER[/PATH][?user=USER][&codex=/path/to/codex]`` (or ``docker://``): a
  running container, reached with ``podman exec -i [--user USER] CONTAINER CODEX
  exec-server --listen stdio`` (the runtime found on ``PATH``, with this process's
  environment: ``CONTAINERS_CONF``, ``DOCKER_HOST``...). Without ``?codex=``, where the
  container has no ``codex`` of this bridge's Codex version, the bridge brings its own
  (:attr:`MachineSpec.bring`): the whole vendor folder of the Codex it runs, copied with
  ``podman cp`` into :func:`brought_folder` once per container and version;
  ``?codex=auto`` brings it whatever the container has;
- ``devcontainer:///LOCAL/FOLDER[?runtime=podman][&user=USER][&codex=...][&path=/IN/IT]``
  (or ``devcontainer://~/FOLDER``): the folder's dev container, brought up with the
  devcontainers CLI (``devcontainer up --workspace-folder FOLDER``: the user's
  ``devcontainer.json``, the runtime it is given with ``--docker-path``, docker by default)
  at each check, then reached as a container of that runtime (:func:`up_container`);
  its sessions work in the container's workspace folder (``workspaceFolder`` of the
  configuration, else ``/workspaces/FOLDER-NAME``, as the CLI mounts it); Codex is
  brought as for a container;
- a machines-file entry with ``command = [ARGV...]`` and no URL: any command that runs
  what follows it somewhere (``kubectl exec -i POD --``, ``devcontainer exec ...``), given
  ``CODEX exec-server --listen stdio`` after its own words (``codex = "/path"``: the Codex
  there);
- ``ws://HOST:PORT[/PATH]`` (or ``wss://``) with a token file: an exec-server someone runs
  already, registered with Codex as it is. Its token goes in plain text over ``ws://``, so
  that is refused for a host that is not loopback (:mod:`bridge.token_urls`): such a
  machine is ``wss://``, or an ssh machine.

``PATH`` is where the machine's sessions work (without it, the session's own ``cwd``, as a
path on that machine). The machines file (:func:`machines_file`) is TOML, a table per
machine; flags add to it, and a flag's machine replaces the file's of the same name::

    [devbox]
    url = "ssh://me@devbox.example.com/home/me/src"
    description = "the team's build box"

    [gpu]
    url = "ws://127.0.0.1:4600"
    token_file = "~/.config/codex-acp-bridge/gpu.token"

    [pod]
    command = ["kubectl", "exec", "-i", "-n", "dev", "pod/devbox", "--"]
    codex = "/opt/codex/bin/codex"
    path = "/src"

All but ws:// machines are places the bridge reaches with a command of its own, whose
stdio is then an exec-server (:func:`exec_server_argv`): the link relays it to Codex.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from .token_urls import plain_text_refusal

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


def parse_url(name: str, url: str) -> MachineSpec:
    """``url`` for machine ``name`` (see the module docstring), or :class:`MachineError`."""
    if not _NAME.fullmatch(name) or name == "local":
        raise MachineError(
            f"machine name {name!r}: letters, digits, '.', '_' and '-' (and not 'local', "
            "which is this machine)"
        )
    parts = urlsplit(url)
    if parts.scheme in RUNTIMES:
        return _container(name, url)
    if parts.scheme == DEVCONTAINER:
        return _devcontainer(name, url)
    if parts.scheme not in ("ssh", "ws", "wss"):
        raise MachineError(
            f"machine {name}: {url!r} is not an ssh://, podman://, docker://, devcontainer://, "
            "ws:// or wss:// URL"
        )
    if not parts.hostname:
        raise MachineError(f"machine {name}: {url!r} names no host")
    try:
        port = parts.port
    except ValueError:
        raise MachineError(f"machine {name}: {url!r} has a bad port") from None
    query = parse_qs(parts.query)
    unknown = set(query) - {"codex"}
    if unknown:
        raise MachineError(f"machine {name}: unknown URL parameter {', '.join(sorted(unknown))}")
    if parts.scheme != "ssh":
        if query:
            raise MachineError(
                f"machine {name}: ?codex= is for ssh://, podman:// and docker:// machines"
            )
        refused = token_refusal(name, url)
        if refused is not None:
            raise MachineError(refused)
        return MachineSpec(name=name, url=url, scheme=parts.scheme, host=parts.hostname, port=port)
    path = unquote(parts.path)
    if path in ("", "/"):
        path = ""
    codex = query.get("codex", ["codex"])[-1]
    bring = ""
    if codex == AUTO:
        # Copied through ssh into the user's cache folder there (a Linux machine of this
        # one's architecture), and run from there.
        codex, bring = "codex", BRING_ALWAYS
    return MachineSpec(
        name=name,
        url=url,
        scheme="ssh",
        host=parts.hostname,
        user=unquote(parts.username) if parts.username else None,
        port=port,
        path=path,
        codex=codex,
        bring=bring,
    )


#: A container's name or ID, as podman and docker allow them.
_CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _container(name: str, url: str) -> MachineSpec:
    """``podman://[USER@]CONTAINER[/PATH][?user=USER][&codex=CODEX]`` (or ``docker://``).
    The container's name is case-sensitive: it is read as written, not as a host name."""
    parts = urlsplit(url)
    userinfo, at, container = parts.netloc.rpartition("@")
    container = unquote(container)
    if not container:
        raise MachineError(f"machine {name}: {url!r} names no container")
    if not _CONTAINER.fullmatch(container):
        raise MachineError(f"machine {name}: {container!r} is not a container's name or ID")
    query = parse_qs(parts.query)
    unknown = set(query) - {"codex", "user"}
    if unknown:
        raise MachineError(f"machine {name}: unknown URL parameter {', '.join(sorted(unknown))}")
    user = query.get("user", [unquote(userinfo) if at else ""])[-1] or None
    path = unquote(parts.path)
    named = query.get("codex", [""])[-1]
    bring = BRING_ALWAYS if named == AUTO else "" if named else BRING_IF_NEEDED
    return MachineSpec(
        name=name,
        url=url,
        scheme=parts.scheme,
        host=container,
        user=user,
        path="" if path in ("", "/") else path,
        codex=named if named and named != AUTO else "codex",
        bring=bring,
    )


def _devcontainer(name: str, url: str) -> MachineSpec:
    """``devcontainer:///LOCAL/FOLDER`` (or ``devcontainer://~/FOLDER``), with
    ``?runtime=``, ``?user=``, ``?codex=`` (as for a container) and ``?path=`` (the
    folder in the container, when it is not the configuration's workspace folder)."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "~"):
        raise MachineError(
            f"machine {name}: {url!r}: a devcontainer:// URL names a folder here, "
            "devcontainer:///home/me/src/app (three slashes) or devcontainer://~/src/app"
        )
    folder = unquote(parts.path)
    if parts.netloc == "~":
        folder = str(Path.home()) + folder
    if not folder.startswith("/") or folder == "/":
        raise MachineError(f"machine {name}: {url!r} names no folder")
    folder = os.path.normpath(folder)
    query = parse_qs(parts.query)
    unknown = set(query) - {"codex", "user", "runtime", "path"}
    if unknown:
        raise MachineError(f"machine {name}: unknown URL parameter {', '.join(sorted(unknown))}")
    runtime = query.get("runtime", [""])[-1]
    if runtime and runtime not in RUNTIMES:
        raise MachineError(f"machine {name}: ?runtime= is podman or docker, not {runtime!r}")
    config = devcontainer_config(Path(folder))
    if config is None:
        raise MachineError(
            f"machine {name}: no .devcontainer/devcontainer.json (or .devcontainer.json) in "
            f"{folder}"
        )
    path = query.get("path", [""])[-1] or workspace_folder(Path(folder), config)
    named = query.get("codex", [""])[-1]
    return MachineSpec(
        name=name,
        url=url,
        scheme=DEVCONTAINER,
        host=folder,
        user=query.get("user", [""])[-1] or None,
        path=path,
        codex=named if named and named != AUTO else "codex",
        bring=BRING_ALWAYS if named == AUTO else "" if named else BRING_IF_NEEDED,
        runtime=runtime,
    )


def devcontainer_config(folder: Path) -> Path | None:
    """The dev container configuration of ``folder``, where the CLI looks first."""
    for each in (folder / ".devcontainer" / "devcontainer.json", folder / ".devcontainer.json"):
        if each.is_file():
            return each
    return None


#: A JSON string (kept), or a // or /* */ comment: devcontainer.json is JSON with comments.
_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.DOTALL)
#: A JSON string (kept), or a comma before a closing bracket (allowed there too).
_TRAILING_COMMA = re.compile(r'("(?:\\.|[^"\\])*")|,(?=\s*[}\]])')


def workspace_folder(folder: Path, config: Path) -> str:
    """Where the CLI puts ``folder`` in its dev container: the configuration's
    ``workspaceFolder`` (its ``${localWorkspaceFolderBasename}`` filled in), else
    ``/workspaces/NAME``. :func:`up_container` checks it against what ``up`` says."""
    default = f"/workspaces/{folder.name}"
    try:
        text = config.read_text(encoding="utf-8")
        for pattern in (_COMMENT, _TRAILING_COMMA):
            text = pattern.sub(lambda m: m.group(1) or "", text)
        found = json.loads(text).get("workspaceFolder")
    except (OSError, ValueError, AttributeError):
        return default
    if not isinstance(found, str) or not found.startswith("/"):
        return default
    return found.replace("${localWorkspaceFolderBasename}", folder.name)


def up_argv(spec: MachineSpec) -> list[str]:
    """What brings ``spec``'s dev container up (or finds it up): the devcontainers CLI."""
    runtime = ["--docker-path", spec.runtime] if spec.runtime else []
    return ["devcontainer", "up", "--workspace-folder", spec.host, *runtime]


def up_container(spec: MachineSpec, stdout: str) -> MachineSpec:
    """The container ``devcontainer up`` said (its last line, JSON), as the machine to
    reach: a container of the dev container's runtime, as its remote user unless the URL
    names one; :class:`MachineError` with the CLI's words when it failed."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        said = json.loads(lines[-1]) if lines else {}
    except ValueError:
        said = {}
    if not isinstance(said, dict) or said.get("outcome") != "success":
        words = [str(said.get(key)) for key in ("message", "description") if said.get(key)]
        raise MachineError(
            f"devcontainer up for {spec.host} failed: {'; '.join(words) or 'no answer'}"
        )
    container, folder = said.get("containerId"), said.get("remoteWorkspaceFolder")
    if not isinstance(container, str) or not _CONTAINER.fullmatch(container):
        raise MachineError(f"devcontainer up for {spec.host} named no container")
    if isinstance(folder, str) and folder != spec.path and "path=" not in spec.url:
        raise MachineError(
            f"the dev container of {spec.host} has its workspace at {folder}, not "
            f"{spec.path}: add ?path={folder} to the machine's URL"
        )
    user = spec.user or (
        said.get("remoteUser") if isinstance(said.get("remoteUser"), str) else None
    )
    return replace(
        spec,
        scheme=spec.runtime or "docker",
        host=container[:12],
        user=user or None,
        runtime="",
    )


def sandbox_machine(name: str, table: Mapping[str, object]) -> MachineSpec:
    """A machines-file entry ``image = "IMAGE"``: a fresh container for each session."""
    if not _NAME.fullmatch(name) or name == "local" or SESSION_MARK in name:
        raise MachineError(
            f"machine name {name!r}: letters, digits, '.', '_' and '-' (and not 'local', "
            "which is this machine)"
        )
    image, runtime = table.get("image"), table.get("runtime", "podman")
    if not isinstance(image, str) or not image or image.startswith("-"):
        raise MachineError(f'machine {name}: image names an image, e.g. "debian:bookworm"')
    if runtime not in RUNTIMES:
        raise MachineError(f'machine {name}: runtime is "podman" or "docker", not {runtime!r}')
    mount = table.get("mount", "folders")
    if mount not in ("folders", "none"):
        raise MachineError(
            f'machine {name}: mount is "folders" (the session\'s, at their own paths: the '
            f'default) or "none", not {mount!r}'
        )
    network = table.get("network", "")
    if not isinstance(network, str) or network.startswith("-"):
        raise MachineError(f'machine {name}: network is a network mode, e.g. "none"')
    run_args = table.get("run_args", [])
    if not isinstance(run_args, list) or not all(isinstance(a, str) for a in run_args):
        raise MachineError(f'machine {name}: run_args is a list of words, e.g. ["--memory", "2g"]')
    return MachineSpec(
        name=name,
        # What the daemon publishes, and what tells two of them apart.
        url=f"{SANDBOX}:{runtime}:{image}",
        scheme=SANDBOX,
        host=image,
        codex=f"{SANDBOX_CODEX_DIR}/bin/codex",
        runtime=str(runtime),
        image=image,
        mount=mount == "folders",
        network=network,
        run_args=tuple(run_args),
        description=str(table.get("description", "")),
    )


#: Between a per-session machine's name and the thread's id (``bridge.engine``'s own).
SESSION_MARK = "@"


def sandbox_container(spec: MachineSpec, thread_id: str) -> str:
    """The container of thread ``thread_id`` on sandbox ``spec``: named after both, so a
    person finds it (``podman ps``)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", thread_id)
    return f"codex-acp-bridge-{spec.name}-{safe}"


def sandbox_run_argv(
    spec: MachineSpec, container: str, codex_dir: Path, folders: Iterable[str], owner: str
) -> list[str]:
    """What makes a session's container: from ``spec``'s image, this bridge's Codex
    (``codex_dir``, its vendor folder) mounted read-only at :data:`SANDBOX_CODEX_DIR`, the
    session's ``folders`` at their own paths (unless ``mount = "none"``), labelled with its
    machine and ``owner``; it sleeps until removed, and each link runs the exec-server in
    it."""
    argv = [spec.runtime, "run", "--detach", "--name", container]
    argv += ["--label", f"{SANDBOX_LABEL}={spec.name}", "--label", f"{OWNER_LABEL}={owner}"]
    argv += ["--volume", f"{codex_dir}:{SANDBOX_CODEX_DIR}:ro"]
    if spec.mount:
        for folder in folders:
            argv += ["--volume", f"{folder}:{folder}"]
    if spec.network:
        argv += ["--network", spec.network]
    return [*argv, *spec.run_args, spec.image, "sleep", "infinity"]


def sandbox_box(spec: MachineSpec, environment: str, container: str) -> MachineSpec:
    """A session's container as the machine its link reaches (named by its environment)."""
    return replace(
        spec, name=environment, scheme=spec.runtime, host=container, image="", run_args=()
    )


def command_machine(
    name: str, command: object, *, codex: object = "codex", path: object = ""
) -> MachineSpec:
    """A machines-file entry ``command = [ARGV...]``: what runs ``CODEX exec-server
    --listen stdio`` there, given after its own words."""
    if not _NAME.fullmatch(name) or name == "local":
        raise MachineError(
            f"machine name {name!r}: letters, digits, '.', '_' and '-' (and not 'local', "
            "which is this machine)"
        )
    if (
        not isinstance(command, list)
        or not command
        or not all(isinstance(word, str) and word for word in command)
    ):
        raise MachineError(
            f'machine {name}: command is a list of words, e.g. ["kubectl", "exec", "-i", '
            '"POD", "--"]'
        )
    if not isinstance(codex, str) or not codex:
        raise MachineError(f'machine {name}: codex is the Codex there, e.g. "/usr/bin/codex"')
    if codex == AUTO:
        raise MachineError(
            f'machine {name}: codex = "auto" cannot be: the bridge cannot copy its Codex '
            'through a command; install Codex there and name it, e.g. "/usr/bin/codex"'
        )
    if not isinstance(path, str):
        raise MachineError(f'machine {name}: path is a folder there, e.g. "/src"')
    words = tuple(command)
    return MachineSpec(
        name=name,
        # What the daemon publishes, and what tells two of them apart.
        url=f"{COMMAND}:{shlex.join(words)}",
        scheme=COMMAND,
        host=words[0],
        path="" if path in ("", "/") else path,
        codex=codex,
        command=words,
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


def parse_flag(text: str) -> MachineSpec:
    """``--machine NAME=URL``."""
    name, sep, url = text.partition("=")
    if not sep or not url:
        raise MachineError(f"--machine takes NAME=URL, got {text!r}")
    return parse_url(name.strip(), url.strip())


def machines_file(env: Mapping[str, str] | None = None) -> Path:
    """The user's machines file: ``$CODEX_ACP_BRIDGE_MACHINES``, else
    ``$XDG_CONFIG_HOME/codex-acp-bridge/machines.toml`` (``~/.config/...``)."""
    env = os.environ if env is None else env
    if env.get(ENV_MACHINES_FILE):
        return Path(env[ENV_MACHINES_FILE]).expanduser()
    config = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "codex-acp-bridge" / "machines.toml"


def read_machines_file(path: Path) -> list[MachineSpec]:
    """The machines of ``path`` (none when it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise MachineError(f"{path}: {exc.strerror or exc}") from None
    import tomllib  # here: most starts have no machines file, and its parser costs 2 ms

    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MachineError(f"{path}: {exc}") from None
    found = []
    for name, table in tables.items():
        if isinstance(table, dict) and "image" in table:
            unknown = set(table) - {
                "image",
                "runtime",
                "mount",
                "network",
                "run_args",
                "description",
            }
            if unknown:
                raise MachineError(
                    f"{path}: [{name}] has unknown keys: {', '.join(sorted(unknown))} (a "
                    "machine of a container per session takes image, runtime, mount, network, "
                    "run_args and description)"
                )
            try:
                found.append(sandbox_machine(name, table))
            except MachineError as exc:
                raise MachineError(f"{path}: {exc}") from None
            continue
        if isinstance(table, dict) and "command" in table:
            unknown = set(table) - {"command", "codex", "path", "description"}
            if unknown:
                raise MachineError(
                    f"{path}: [{name}] has unknown keys: {', '.join(sorted(unknown))} (a "
                    "command machine takes command, codex, path and description)"
                )
            try:
                spec = command_machine(
                    name,
                    table["command"],
                    codex=table.get("codex", "codex"),
                    path=table.get("path", ""),
                )
            except MachineError as exc:
                raise MachineError(f"{path}: {exc}") from None
            found.append(replace(spec, description=str(table.get("description", ""))))
            continue
        if not isinstance(table, dict) or not isinstance(table.get("url"), str):
            raise MachineError(
                f'{path}: [{name}] needs url = "ssh://...", "podman://...", "ws://"... or '
                "command = [...]"
            )
        unknown = set(table) - {"url", "token_file", "description"}
        if unknown:
            raise MachineError(f"{path}: [{name}] has unknown keys: {', '.join(sorted(unknown))}")
        spec = parse_url(name, table["url"])
        token = table.get("token_file")
        if token is not None:
            token = str(Path(str(token)).expanduser())
        found.append(replace(spec, token_file=token, description=str(table.get("description", ""))))
    return found


def gather(
    flags: Iterable[str],
    token_files: Iterable[str],
    *,
    env: Mapping[str, str] | None = None,
    file: Path | None = None,
) -> list[MachineSpec]:
    """The machines ``serve`` or ``daemon`` acts on: the file's, then the flags' (a flag's
    machine replaces the file's of that name), each ws machine with its token file
    (``--machine-token-file NAME=FILE``)."""
    machines = {m.name: m for m in read_machines_file(file or machines_file(env))}
    for flag in flags:
        spec = parse_flag(flag)
        machines[spec.name] = spec
    for text in token_files:
        name, sep, path = text.partition("=")
        if not sep or not path:
            raise MachineError(f"--machine-token-file takes NAME=FILE, got {text!r}")
        if name not in machines:
            raise MachineError(f"--machine-token-file {name}: no machine named {name}")
        machines[name] = replace(machines[name], token_file=str(Path(path).expanduser()))
    for spec in machines.values():
        if not spec.relayed and spec.token_file is None:
            raise MachineError(
                f"machine {spec.name}: a ws:// exec-server needs its token "
                f"(--machine-token-file {spec.name}=FILE, or token_file in the machines file)"
            )
        if spec.relayed and spec.token_file is not None:
            raise MachineError(
                f"machine {spec.name}: a token file is for ws:// machines; {spec.scheme} "
                "machines get a fresh token at every start"
            )
    return list(machines.values())


def ssh_command(flag: str | None, env: Mapping[str, str] | None = None) -> list[str]:
    """The program and arguments that run ssh: ``--ssh-command``, else
    ``$CODEX_ACP_BRIDGE_SSH_COMMAND``, else ``ssh`` (split as a shell would)."""
    env = os.environ if env is None else env
    text = flag or env.get(ENV_SSH_COMMAND) or "ssh"
    argv = shlex.split(text)
    if not argv:
        raise MachineError("the ssh command is empty")
    return argv


def ssh_argv(spec: MachineSpec, ssh: list[str], remote: str) -> list[str]:
    """The command that runs ``remote`` (a shell command line) on ``spec``'s host."""
    argv = [*ssh, *SSH_OPTIONS]
    if spec.port:
        argv += ["-p", str(spec.port)]
    if spec.user:
        argv += ["-l", spec.user]
    return [*argv, "--", spec.host, remote]


def place_argv(spec: MachineSpec, ssh: list[str], codex_args: list[str]) -> list[str]:
    """The command that runs ``spec.codex`` with ``codex_args`` on a relayed machine: over
    ssh (a remote shell's command line), in a container (``podman exec -i``), or after a
    command machine's own words; nothing else in between, so no shell is needed there."""
    if spec.ssh:
        return ssh_argv(spec, ssh, shlex.join([spec.codex, *codex_args]))
    if spec.scheme in RUNTIMES:
        user = ["--user", spec.user] if spec.user else []
        return [spec.scheme, "exec", "-i", *user, spec.host, spec.codex, *codex_args]
    if spec.scheme == COMMAND:
        return [*spec.command, spec.codex, *codex_args]
    raise ValueError(f"machine {spec.name}: a {spec.scheme}:// machine is not reached by a command")


def exec_server_argv(spec: MachineSpec, ssh: list[str]) -> list[str]:
    """What a link runs for each of Codex's connections: a command whose stdio is an
    exec-server speaking JSON-RPC, one message a line. Over ssh the remote shell says
    Codex's version on the first line before it (:func:`version_first`)."""
    if spec.ssh:
        return ssh_argv(spec, ssh, exec_server_command(spec))
    return place_argv(spec, ssh, ["exec-server", "--listen", "stdio"])


def version_first(spec: MachineSpec) -> bool:
    """Whether :func:`exec_server_argv`'s first line is Codex's version (ssh's remote
    shell says it; a container or a command may have no shell to)."""
    return spec.ssh


def version_argv(spec: MachineSpec, ssh: list[str]) -> list[str]:
    """What says which Codex the machine has: its ``--version``."""
    return place_argv(spec, ssh, ["--version"])


def program(spec: MachineSpec, ssh: list[str]) -> str:
    """The program the bridge runs to reach ``spec``, for "could not run" words."""
    return exec_server_argv(spec, ssh)[0]


def version_command(spec: MachineSpec) -> str:
    """What the remote shell runs to say which Codex it has."""
    return f"{shlex.quote(spec.codex)} --version"


def exec_server_command(spec: MachineSpec) -> str:
    """What the remote shell runs for a link: Codex's version on the first line, then the
    exec-server speaking JSON-RPC over the channel (one message a line)."""
    codex = shlex.quote(spec.codex)
    return f"{codex} --version && exec {codex} exec-server --listen stdio"


_VERSION = re.compile(r"\d+\.\d+\.\d+\S*")


def codex_version(line: str) -> str | None:
    """``codex-cli 0.171.0`` → ``0.171.0``."""
    found = _VERSION.search(line)
    return found.group() if found else None


def explain_failure(spec: MachineSpec, status: int | None, stderr: str) -> str:
    """Why reaching ``spec`` failed, in ssh's, the remote shell's or the container
    runtime's own words."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    # ssh's banner of a changed host key is many lines; its verdict is the last.
    words = "; ".join(lines[-3:]) if lines else ""
    if not spec.ssh:
        return _explain_place(spec, status, words)
    if status == 127 or "command not found" in stderr or "not found" in words:
        return (
            f"no Codex on {spec.where()} ({spec.codex!r} not found: install it there, or name "
            f"it with ?codex=/path/to/codex in the machine's URL){': ' + words if words else ''}"
        )
    if status is None:
        return words or "the link ended"
    if status == 255:
        return f"ssh to {spec.where()} failed: {words or 'exit status 255'}"
    return f"{spec.where()}: exit status {status}{': ' + words if words else ''}"


def _explain_place(spec: MachineSpec, status: int | None, words: str) -> str:
    """A container's or a command's failure: the runtime's words (podman and docker end
    125 when the container is missing or stopped, 126/127 when the program inside cannot
    run)."""
    said = f": {words}" if words else ""
    lowered = words.lower()
    if status in (126, 127) and ("not found" in lowered or "no such file" in lowered):
        return (
            f"no Codex in {spec.where()} ({spec.codex!r} not found: install it there, or "
            f"name it with {codex_hint(spec)}){said}"
        )
    if status is None:
        return words or "the link ended"
    return f"{spec.where()}: {words}" if words else f"{spec.where()}: exit status {status}"


def codex_hint(spec: MachineSpec) -> str:
    """Where the user names the Codex of ``spec``."""
    return 'codex = "/path/to/codex"' if spec.scheme == COMMAND else "?codex=/path/to/codex"


# -- Codex brought along (containers) --------------------------------------------------

#: Where the bridge copies its Codex's vendor folder in a container (``{version}``: its own).
BROUGHT_FOLDER = "/tmp/codex-acp-bridge-codex-{version}"
#: A container image's architecture (podman's and docker's words) → a Rust target's.
_ARCHITECTURES = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}


def brought_folder(version: str) -> str:
    """Where Codex ``version``, brought by the bridge, is in a container."""
    return BROUGHT_FOLDER.format(version=version)


def vendor_folder(program: str) -> tuple[Path, str, str | None] | None:
    """The vendor folder of the Codex package ``program`` (the native binary the bridge
    runs) is in, its Rust target (``x86_64-unknown-linux-musl``) and its version when the
    folder says it (``codex-package.json``); ``None`` when
    ``program`` is not a package's ``vendor/TARGET/bin/codex``. The whole folder is what
    runs elsewhere: the binary alone says it is 0.0.0 and has no bundled bubblewrap."""
    binary = Path(program).resolve()
    folder = binary.parent.parent
    if binary.parent.name != "bin" or folder.parent.name != "vendor":
        return None
    target, version = folder.name, None
    with contextlib.suppress(OSError, ValueError):
        described = json.loads((folder / "codex-package.json").read_text(encoding="utf-8"))
        if isinstance(described, dict):
            if isinstance(described.get("target"), str):
                target = described["target"]
            if isinstance(described.get("version"), str):
                version = described["version"]
    return folder, target, version


def runs_there(target: str, platform: str) -> bool:
    """Whether a Codex built for ``target`` runs in a container of ``platform``
    (``linux/amd64``, as ``podman image inspect`` says it)."""
    os_name, _, architecture = platform.strip().partition("/")
    wanted = _ARCHITECTURES.get(architecture.split("/")[0])
    return os_name == "linux" and "-linux-" in target and target.split("-")[0] == wanted


def image_argv(spec: MachineSpec) -> list[str]:
    """What says which image a container runs (its ID)."""
    return [spec.scheme, "container", "inspect", "--format", "{{.Image}}", spec.host]


def platform_argv(spec: MachineSpec, image: str) -> list[str]:
    """What says an image's platform: ``linux/amd64``."""
    return [spec.scheme, "image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", image]


def copy_argv(
    spec: MachineSpec, source: Path, folder: str, ssh: list[str] | None = None
) -> list[str]:
    """What copies the folder ``source`` here to ``folder`` in the container (which must
    not exist yet: ``cp`` would put it inside); on an ssh machine, a tar stream through
    ssh's stdin into that folder there."""
    if spec.ssh:
        quoted = shlex.quote(folder)
        remote = ssh_argv(spec, ssh or ["ssh"], f"mkdir -p {quoted} && tar -xf - -C {quoted}")
        return ["sh", "-c", 'cd "$1" && shift && tar -cf - . | "$@"', "sh", str(source), *remote]
    return [spec.scheme, "cp", str(source), f"{spec.host}:{folder}"]


def rename_argv(
    spec: MachineSpec, part: str, folder: str, ssh: list[str] | None = None
) -> list[str]:
    """What renames the folder ``part`` to ``folder`` there, at once, unless a ``folder``
    with something in it is there (``mv -T`` refuses it)."""
    return _there(spec, ssh, ["mv", "-T", part, folder])


def remove_argv(spec: MachineSpec, path: str, ssh: list[str] | None = None) -> list[str]:
    """What removes ``path`` (a folder of the bridge's) there."""
    return _there(spec, ssh, ["rm", "-rf", path])


def owners_argv(spec: MachineSpec, folder: str) -> list[str]:
    """What says, in a container, who runs there (``id -u``, as the link's user) and the
    owner and mode of ``folder`` and of its ``bin/codex`` (``stat``): a folder of /tmp is
    anyone's to make first."""
    user = ["--user", spec.user] if spec.user else []
    script = 'id -u && stat -c "%u %a" -- "$1" "$1/bin/codex"'
    return [spec.scheme, "exec", *user, spec.host, "sh", "-c", script, "sh", folder]


def foreign(said: str) -> str | None:
    """What :func:`owners_argv` said, judged: why the folder is not to be run from (owned
    by another user than root or the link's, or writable by others), else ``None``."""
    lines = said.split()
    if len(lines) < 5:
        return None
    uid, pairs = lines[0], list(zip(lines[1::2], lines[2::2], strict=False))
    for owner, mode in pairs:
        if owner not in ("0", uid):
            return f"owned by uid {owner}, not by root or the user Codex runs as ({uid})"
        if int(mode, 8) & 0o022:
            return f"writable by others (mode {mode})"
    return None


def _there(spec: MachineSpec, ssh: list[str] | None, argv: list[str]) -> list[str]:
    if spec.ssh:
        return ssh_argv(spec, ssh or ["ssh"], shlex.join(argv))
    return [spec.scheme, "exec", spec.host, *argv]


#: What an ssh machine says of itself for the bridge to bring its Codex there: its
#: system, its architecture (``uname``) and its user's cache folder.
SSH_FACTS = 'uname -s -m && printf "%s\\n" "${XDG_CACHE_HOME:-$HOME/.cache}"'


def ssh_facts(said: str, version: str) -> tuple[str, str] | None:
    """What :data:`SSH_FACTS` said: the machine's platform (``linux/x86_64``) and where
    Codex ``version`` goes there; ``None`` when it said something else."""
    lines = said.strip().splitlines()
    if len(lines) != 2 or len(lines[0].split()) != 2 or not lines[1].startswith("/"):
        return None
    system, machine = lines[0].split()
    return f"{system.lower()}/{machine}", f"{lines[1]}/codex-acp-bridge/codex-{version}"
